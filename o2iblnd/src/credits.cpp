// One connection's flow control (credits.hpp), ko2iblnd's rules.
#include "credits.hpp"

namespace lnet::o2ib {

Credits::Credits(unsigned queue_depth, unsigned hiw, unsigned concurrent, std::uint16_t version)
    : depth_(queue_depth),
      hiw_(hiw),
      concurrent_(concurrent),
      version_(version),
      credits_(queue_depth),
      reserved_(queue_depth) {}

bool Credits::takes_credit(MsgType t) const {
  switch (t) {
    case MsgType::Immediate:
    case MsgType::PutReq:
    case MsgType::GetReq: return true;
    case MsgType::Noop: return version_ == kVersion1;  // V2: out of band
    default: return false;                             // replies and completions: a buffer reserved for them
  }
}

bool Credits::can_send(MsgType t) const {
  if (in_flight_ >= concurrent_) return false;
  if ((t == MsgType::PutReq || t == MsgType::GetReq) && reserved_ == 0) return false;
  if (!takes_credit(t)) return true;
  if (credits_ == 0) return false;
  // V1 keeps the last credit for a NOOP, so that credits can always go back.
  return !(version_ == kVersion1 && credits_ == 1 && t != MsgType::Noop);
}

std::uint8_t Credits::on_send(MsgType t) {
  if (takes_credit(t)) --credits_;
  if (t == MsgType::PutReq || t == MsgType::GetReq) --reserved_;
  ++in_flight_;
  auto back = static_cast<std::uint8_t>(owed_);
  owed_ = 0;
  return back;
}

void Credits::on_send_done() {
  if (in_flight_ > 0) --in_flight_;
}

bool Credits::on_recv(std::uint8_t returned) {
  if (credits_ + returned > depth_) return false;
  credits_ += returned;
  return true;
}

void Credits::on_repost(Repost r) {
  if (r == Repost::PeerCredit) ++owed_;
  if (r == Repost::ReservedCredit) ++reserved_;
}

Repost Credits::repost_of(MsgType t, bool put_acked) const {
  switch (t) {
    case MsgType::Noop: return version_ == kVersion1 ? Repost::PeerCredit : Repost::NoCredit;
    case MsgType::PutReq: return put_acked ? Repost::NoCredit : Repost::PeerCredit;
    case MsgType::PutAck:
    case MsgType::PutNak:
    case MsgType::GetDone: return Repost::ReservedCredit;
    default: return Repost::PeerCredit;  // IMMEDIATE, GET_REQ, PUT_DONE (the PUT_REQ's credit)
  }
}

bool Credits::need_noop(bool reply_queued, bool request_queued, bool keepalive_due) const {
  if (owed_ < hiw_ && !keepalive_due) return false;
  if (reply_queued) return false;  // it carries them
  if (version_ == kVersion2) return !request_queued || credits_ == 0;
  // V1: the NOOP itself takes a credit, and the last one is kept for it.
  if (credits_ == 0 || (credits_ == 1 && owed_ == 0)) return false;
  return !request_queued || credits_ == 1;
}

}  // namespace lnet::o2ib
