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

/* Same identity for grouping: two Python frames at the same file, line and function. */
bool ot_frame_same_line(const struct ot_frame *a, const struct ot_frame *b);

/* True when Python frame `inner` runs on the very line of its caller `outer` (same file and line): a
 * comprehension's own frame (Python 3.11 and before: forward.<locals>.<listcomp>) inside the function that
 * runs it. Every report names such a caller by `outer`, the function the user wrote. */
bool ot_frame_on_callers_line(const struct ot_frame *inner, const struct ot_frame *outer);

#endif
