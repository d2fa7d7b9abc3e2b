// Compiles the precompiled torch header once (see torch_pch.h); other modules reuse it.
#include "src/torch_pch.h"
