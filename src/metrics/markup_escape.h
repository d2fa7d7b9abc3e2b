// Text made safe inside HTML and SVG (XML), in element content and in quoted attribute values:
// & < > " ' become entities. Used for everything a report shows that came from a file (config
// text, metric names, paths), so a value such as "</pre><script>" stays text.
#pragma once

#include <string>
#include <string_view>

namespace ferry {

std::string escape_markup(std::string_view text);

}  // namespace ferry
