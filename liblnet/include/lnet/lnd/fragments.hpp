// Copies between fragment lists (iovec arrays), for drivers that move payload by memcpy
// (lo, shared memory, bounce buffers). Offsets and lengths are in bytes; a copy stops at
// the end of the shorter list.
#pragma once

#include <sys/uio.h>

#include <cstdint>

namespace lnet {

void copy_fragments(const iovec* dst, unsigned ndst, std::uint32_t dst_off, const iovec* src, unsigned nsrc,
                    std::uint32_t src_off, std::uint32_t len);
void copy_to_fragments(const iovec* dst, unsigned ndst, std::uint32_t dst_off, const void* src, std::uint32_t len);
void copy_from_fragments(void* dst, const iovec* src, unsigned nsrc, std::uint32_t src_off, std::uint32_t len);

}  // namespace lnet
