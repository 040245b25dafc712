// The C++ API of liblnet in one include.
#pragma once

#include <lnet/api.hpp>
#include <lnet/config.hpp>
#include <lnet/event.hpp>
#include <lnet/lnd.hpp>
#include <lnet/log.hpp>
#include <lnet/md.hpp>
#include <lnet/nid.hpp>
#include <lnet/nid_range.hpp>
#include <lnet/progress.hpp>
#include <lnet/result.hpp>
#include <lnet/socklnd.hpp>
#include <lnet/stats.hpp>
#include <lnet/wire.hpp>
