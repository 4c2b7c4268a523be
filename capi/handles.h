// The handle tables of each ABI type (process-wide).
#pragma once

#include "capi_internal.h"
#include "engine/engine.h"
#include "engine/engine_config.h"
#include "engine/event.h"
#include "engine/session.h"
#include "sample/sampling_params.h"

namespace deepinfer::capi {

using ConfigTable = HandleTable<EngineConfig, 1>;
using EngineTable = HandleTable<Engine, 2>;
using SamplingTable = HandleTable<SamplingParams, 3>;
using SessionTable = HandleTable<Session, 4>;
using EventTable = HandleTable<Event, 5>;

ConfigTable& configs();
EngineTable& engines();
SamplingTable& samplings();
SessionTable& sessions();
EventTable& events();

}  // namespace deepinfer::capi
