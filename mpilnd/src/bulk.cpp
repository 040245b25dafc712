// MPI LND bulk transfers: a payload (or a GET's sink and source) as MPI messages on a
// tag of its own, straight from and into the MD's fragments, in chunks of at most the
// peers' chunk size.
#include <lnet/lnd/pool.hpp>

#include "mpi_ni.hpp"

namespace lnet::mpi {

Bulk* MpiNi::get_bulk() { return Pool<Bulk>::take(); }

void MpiNi::put_bulk(Bulk* b) {
  b->send = b->ready = b->sink = b->own_tag = b->cancelled = b->left = false;
  b->peer = nullptr;
  b->tag = b->nchunks = b->done = 0;
  b->bytes = 0;
  b->rc = 0;
  b->kept = nullptr;  // its requests' now (KeptChunk)
  b->due = {};
  b->tx = nullptr;
  b->msg = nullptr;
  b->discard.reset();
  b->discard_len = 0;
  b->iov = nullptr;
  b->niov = 0;
  b->offset = b->len = 0;
  b->total = 0;
  Pool<Bulk>::give(b);
}

// The segments of one chunk, addressed for MPI: MD fragments, then the discard buffer.
struct ChunkSegments {
  MPI_Aint displs[kMaxIov + 1];
  int lens[kMaxIov + 1];
  int n = 0;
};

// Posts the MPI messages of a bulk transfer: chunk i carries bytes [i*C, (i+1)*C) of the
// `total` bytes on the wire (possibly none, for a GET source shorter than its sink);
// the first `len` of them are in (iov, niov) from `offset`, the rest land in `discard`.
bool MpiNi::post_bulk_locked(Bulk* b) {
  if (b->total > b->len && !b->send) {
    b->discard_len = static_cast<std::uint32_t>(std::min<std::uint64_t>(b->total - b->len, UINT32_MAX));
    b->discard = std::make_unique<std::uint8_t[]>(b->discard_len);
  }
  std::uint32_t chunk = chunk_for(*b->peer);
  for (std::uint32_t c = 0; c < b->nchunks; ++c) {
    std::uint64_t lo = std::min<std::uint64_t>(static_cast<std::uint64_t>(c) * chunk, b->total);
    std::uint64_t hi = std::min<std::uint64_t>(lo + chunk, b->total);
    if (b->send) hi = std::min<std::uint64_t>(hi, b->len);  // a sender sends what it has
    if (b->send) lo = std::min<std::uint64_t>(lo, hi);
    ChunkSegments seg;
    if (!address_chunk(b, lo, hi, seg) || !post_chunk_locked(b, seg)) {
      b->nchunks = c;  // what was posted still completes
      // The peer may have posted (or may yet post) its side of every chunk on this tag:
      // it is never used again with this peer.
      b->own_tag = false;
      return false;
    }
  }
  return true;
}

// The segments of bytes [lo, hi) of the transfer. False when MPI could not address one.
bool MpiNi::address_chunk(const Bulk* b, std::uint64_t lo, std::uint64_t hi, ChunkSegments& seg) {
  std::uint64_t pos = 0;  // position in the logical buffer
  std::uint64_t skip = b->offset;
  bool addressed = true;
  for (unsigned f = 0; f < b->niov && pos < std::min<std::uint64_t>(hi, b->len); ++f) {
    std::uint64_t flen = b->iov[f].iov_len;
    if (skip >= flen) {
      skip -= flen;
      continue;
    }
    auto* base = static_cast<std::uint8_t*>(b->iov[f].iov_base) + skip;
    flen = std::min<std::uint64_t>(flen - skip, b->len - pos);
    skip = 0;
    std::uint64_t s = std::max(pos, lo), e = std::min(pos + flen, hi);
    if (s < e) {
      addressed = addressed && check(MPI_Get_address(base + (s - pos), &seg.displs[seg.n]), "MPI_Get_address");
      seg.lens[seg.n++] = static_cast<int>(e - s);
    }
    pos += flen;
  }
  if (!b->send && hi > b->len) {
    std::uint64_t s = std::max<std::uint64_t>(lo, b->len);
    addressed =
        addressed && check(MPI_Get_address(b->discard.get() + (s - b->len), &seg.displs[seg.n]), "MPI_Get_address");
    seg.lens[seg.n++] = static_cast<int>(hi - s);
  }
  return addressed;
}

// Posts one chunk's receive or send: one segment as bytes, several as a derived datatype,
// none as an empty message.
bool MpiNi::post_chunk_locked(Bulk* b, ChunkSegments& seg) {
  void* buf = b->discard ? static_cast<void*>(b->discard.get()) : static_cast<void*>(&b->tag);
  int count = 0;
  MPI_Datatype type = MPI_BYTE;
  bool derived = seg.n > 1;
  if (seg.n == 1) {
    buf = reinterpret_cast<void*>(seg.displs[0]);
    count = seg.lens[0];
  } else if (derived) {
    if (!check(MPI_Type_create_hindexed(seg.n, seg.lens, seg.displs, MPI_BYTE, &type), "MPI_Type_create_hindexed") ||
        !check(MPI_Type_commit(&type), "MPI_Type_commit"))
      return false;
    buf = MPI_BOTTOM;
    count = 1;
  }
  MPI_Request r;
  int tag = static_cast<int>(b->tag);
  int rc = !b->send   ? MPI_Irecv(buf, count, type, b->peer->rank, tag, comm_, &r)
           : b->ready ? MPI_Irsend(buf, count, type, b->peer->rank, tag, comm_, &r)
                      : MPI_Issend(buf, count, type, b->peer->rank, tag, comm_, &r);
  if (derived) check(MPI_Type_free(&type), "MPI_Type_free");  // MPI keeps it until the operation is done
  if (!check(rc, b->send ? (b->ready ? "MPI_Irsend" : "MPI_Issend") : "MPI_Irecv")) return false;
  add_request(r, Owner::BulkChunk, b, b->due);
  stats_.chunks.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void MpiNi::bulk_chunk_done_locked(Bulk* b, const MPI_Status& st, int err, Done& done) {
  int cancelled = 0;
  if (!check(MPI_Test_cancelled(&st, &cancelled), "MPI_Test_cancelled")) cancelled = 0;  // undefined after an error
  if (cancelled) {
    b->cancelled = true;
  } else if (err != MPI_SUCCESS) {
    if (!b->rc) b->rc = -EIO;
  } else if (!b->send) {
    int n = 0;
    if (!check(MPI_Get_count(&st, MPI_BYTE, &n), "MPI_Get_count"))
      b->rc = b->rc ? b->rc : -EIO;  // how much arrived is unknown
    else if (n > 0)
      b->bytes += static_cast<std::uint64_t>(n);
  }
  if (++b->done >= b->nchunks) bulk_finished_locked(b, done);
}

void MpiNi::bulk_finished_locked(Bulk* b, Done& done) {
  Peer& p = *b->peer;
  if (b->own_tag) free_tag(p, b->tag);
  if (b->sink) {
    auto it = std::find(p.sinks.begin(), p.sinks.end(), b);
    if (it != p.sinks.end()) p.sinks.erase(it);
  }
  if (b->cancelled && !b->rc) b->rc = -ECANCELED;
  if (b->send && b->tx) {
    Tx* tx = b->tx;
    int rc = b->rc;
    put_bulk(b);
    tx_part_done_locked(tx, rc, done);
    return;
  }
  done.bulks.push_back(b);
}

// Cancels the posted MPI requests of `obj` (a GET sink told that nothing will come, or a
// receive at shutdown); they complete as cancelled in a later MPI_Testsome.
void MpiNi::cancel_requests_of_locked(void* obj) {
  for (std::size_t i = opts_.pool_depth; i < reqs_.size(); ++i)
    if (owners_[i].obj == obj && reqs_[i] != MPI_REQUEST_NULL) check(MPI_Cancel(&reqs_[i]), "MPI_Cancel");
}

}  // namespace lnet::mpi
