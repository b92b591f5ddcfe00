#pragma once
// The report's comparison section (`pipescope report B --compare A`): the
// diff of a baseline run against the report's job (docs/diff.md), as HTML.
#include "compare/Diff.h"

#include <string>

namespace pipescope::report {

// Appends <section id="comparison">. Every trace-derived string is escaped.
void compareSection(std::string& out, const compare::DiffResult& diff);

} // namespace pipescope::report
