// The dashboard's page, script and style sheet, compiled into the binary so that the page works
// without internet (no CDN, no npm at run time: plain SVG charts drawn by app.js).
#pragma once

namespace cdt::dashboard {

extern const char kIndexHtml[];
extern const char kAppJs[];
extern const char kStyleCss[];

}  // namespace cdt::dashboard
