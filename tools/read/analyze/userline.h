/* Whose line is it: the program's own code, or a library's. A Python user reads a call site as "my line
 * that led here, then the library call it went through": "h8.py:19 in evaluate → linear.py:134 in
 * Linear.forward". The user's frame is the innermost Python frame that is not in the standard library,
 * not installed (site-packages, dist-packages) and not a framework's own source. */
#ifndef OT_READ_USERLINE_H
#define OT_READ_USERLINE_H

#include <stdbool.h>

#include "symbols/resolve.h"

/* True for a Python frame of the program's own code. Native frames are never user frames. */
bool ot_frame_is_user(const struct ot_frame *f);

/* True for a Python frame inside the standard library, an installed package or a framework. */
bool ot_frame_is_library(const struct ot_frame *f);

/* "torch/nn/modules/linear.py" for ".../site-packages/torch/nn/modules/linear.py" (the last site-packages
 * or dist-packages in the path: a virtualenv inside one is read from its own root); other paths whole. */
struct ot_str ot_package_path(struct ot_str path);

/* How every report spells a file in a call site's one-line name: inside an installed package, the path from
 * the package root ("tinynn/__init__.py": a base name alone does not say whose __init__.py it is); elsewhere
 * (the program's own files, the standard library, C sources) the base name ("train.py", "cache.c"). */
struct ot_str ot_site_file(struct ot_str path);

/* Same identity for grouping: two Python frames at the same file, line and function. */
bool ot_frame_same_line(const struct ot_frame *a, const struct ot_frame *b);

/* True when Python frame `inner` runs on the very line of its caller `outer` (same file and line): a
 * comprehension's own frame (Python 3.11 and before: forward.<locals>.<listcomp>) inside the function that
 * runs it. Every report names such a caller by `outer`, the function the user wrote. */
bool ot_frame_on_callers_line(const struct ot_frame *inner, const struct ot_frame *outer);

#endif
