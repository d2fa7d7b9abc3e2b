// Files of a model folder, checked not to lead elsewhere: a downloaded folder is someone else's
// data, and a symbolic link in it must not make Ferry read files the user never named.
#pragma once

#include <filesystem>

namespace ferry {

// `file`, a file of the model folder `folder`: a symbolic link (or a linked parent) must resolve
// inside the folder, or into the Hugging Face hub cache's blob store of the same repository
// (<repo>/snapshots/<rev>/<file> -> <repo>/blobs/<hash>, how the hub keeps files). Anything else
// is an InputError naming the link and where it points. Returns `file`.
std::filesystem::path checked_folder_file(const std::filesystem::path& folder, const std::filesystem::path& file);

}  // namespace ferry
