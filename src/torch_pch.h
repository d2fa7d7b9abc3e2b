// Precompiled header for every translation unit of ferry_lib and the tests: libtorch's headers
// dominate compile time, so they are parsed once per build (see CMakeLists.txt).
#pragma once

#include <torch/torch.h>
