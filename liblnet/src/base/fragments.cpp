// Copies between fragment lists, for drivers that move payload by memcpy.
#include <lnet/lnd/fragments.hpp>

#include <algorithm>
#include <cstring>

namespace lnet {

namespace {
// Advances (i, off) past `skip` bytes of the fragment list.
void seek(const iovec* v, unsigned n, std::uint32_t skip, unsigned& i, std::size_t& off) {
  i = 0;
  off = skip;
  while (i < n && off >= v[i].iov_len) {
    off -= v[i].iov_len;
    ++i;
  }
}
}  // namespace

void copy_fragments(const iovec* dst, unsigned ndst, std::uint32_t dst_off, const iovec* src, unsigned nsrc,
                    std::uint32_t src_off, std::uint32_t len) {
  unsigned di, si;
  std::size_t doff, soff;
  seek(dst, ndst, dst_off, di, doff);
  seek(src, nsrc, src_off, si, soff);
  while (len > 0 && di < ndst && si < nsrc) {
    std::size_t n = std::min({static_cast<std::size_t>(len), dst[di].iov_len - doff, src[si].iov_len - soff});
    std::memcpy(static_cast<char*>(dst[di].iov_base) + doff, static_cast<const char*>(src[si].iov_base) + soff, n);
    len -= static_cast<std::uint32_t>(n);
    doff += n;
    soff += n;
    if (doff == dst[di].iov_len) {
      ++di;
      doff = 0;
    }
    if (soff == src[si].iov_len) {
      ++si;
      soff = 0;
    }
  }
}

void copy_to_fragments(const iovec* dst, unsigned ndst, std::uint32_t dst_off, const void* src, std::uint32_t len) {
  iovec s{const_cast<void*>(src), len};
  copy_fragments(dst, ndst, dst_off, &s, 1, 0, len);
}

void copy_from_fragments(void* dst, const iovec* src, unsigned nsrc, std::uint32_t src_off, std::uint32_t len) {
  iovec d{dst, len};
  copy_fragments(&d, 1, 0, src, nsrc, src_off, len);
}

}  // namespace lnet
