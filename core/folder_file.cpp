// Model-folder files that must stay inside the folder (see folder_file.h).
#include "core/folder_file.h"

#include "core/error.h"

namespace ferry {

std::filesystem::path checked_folder_file(const std::filesystem::path& folder, const std::filesystem::path& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target = fs::weakly_canonical(file, ec);
  const fs::path base = fs::weakly_canonical(folder.empty() ? fs::path(".") : folder, ec);
  if (ec) return file;  // what cannot be resolved is reported by the reader that opens it
  auto inside = [](const fs::path& path, const fs::path& dir) {
    const fs::path relative = path.lexically_relative(dir);
    return !relative.empty() && *relative.begin() != "..";
  };
  if (inside(target, base)) return file;
  if (base.parent_path().filename() == "snapshots" && inside(target, base.parent_path().parent_path() / "blobs")) {
    return file;
  }
  throw InputError("'" + file.string() + "' is a link to '" + target.string() + "', outside the model folder '" +
                   folder.string() + "'; Ferry reads only files inside the folder it is given (or the Hugging "
                   "Face cache's blobs/ of a snapshot folder): copy the file into the folder, or name the folder "
                   "that holds it");
}

}  // namespace ferry
