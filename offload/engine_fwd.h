// A forward declaration of the parameter engine (offload/engine.h), for headers that only pass it
// by reference: they need not pull in torch and the engine's interface.
#pragma once

namespace ferry::offload {
class ParameterEngine;
}  // namespace ferry::offload
