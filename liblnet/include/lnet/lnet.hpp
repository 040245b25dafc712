// The C++ API of liblnet for applications, in one include. Driver writers include
// <lnet/lnd/lnd.hpp> (the driver SPI) besides; the classic C API is <lnet/lnet.h>.
#pragma once

#include <lnet/api.hpp>
#include <lnet/config.hpp>
#include <lnet/control.hpp>
#include <lnet/env.hpp>
#include <lnet/event.hpp>
#include <lnet/log.hpp>
#include <lnet/md.hpp>
#include <lnet/nid.hpp>
#include <lnet/nid_range.hpp>
#include <lnet/progress.hpp>
#include <lnet/result.hpp>
#include <lnet/socklnd.hpp>
#include <lnet/stats.hpp>
#include <lnet/wire.hpp>
