// PNG files of report charts, rasterised from the same SVG the HTML page inlines by librsvg's
// `rsvg-convert` (Debian package librsvg2-bin, listed in scripts/debian-packages.txt as a tool):
// a well-kept renderer already on most Linux desktops, so Ferry draws each chart once, as SVG.
#pragma once

#include <filesystem>
#include <string>

namespace ferry::cli {

// The rsvg-convert program on PATH, or an empty path.
std::filesystem::path find_rsvg_convert();

// Throws InputError (exit 2) with the apt-get line when rsvg-convert is not on PATH.
void require_rsvg_convert();

// Writes `png` from a standalone SVG document (svg_chart.h's standalone form). InputError naming
// the file when rsvg-convert is missing or fails.
void write_png_from_svg(const std::string& svg, const std::filesystem::path& png);

}  // namespace ferry::cli
