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

/* True for a Python frame of the standard library's multiprocessing (its Pool's worker loop, a Process's
 * bootstrap): a stack with one runs in a worker that multiprocessing started. */
bool ot_frame_is_multiprocessing(const struct ot_frame *f);

/* ot_frame_is_user, knowing the Python frame F called (CALLEE, the next one inward; NULL for none): a process
 * that multiprocessing spawned (or its forkserver started) runs `python -c "from multiprocessing.spawn import
 * spawn_main; spawn_main(...)"`, whose "<string>:1 in <module>" frame calls spawn_main. That frame is
 * multiprocessing's start-up, not the user's line (walk 9, #10c). */
bool ot_frame_is_user_calling(const struct ot_frame *f, const struct ot_frame *callee);

/* The user's frame among FR[0..N) (Python frames innermost first): its index, or N when none. *mp: whether a
 * frame is multiprocessing's (without a user's frame, the site reads "a multiprocessing worker"). */
size_t ot_user_frame_index(const struct ot_frame *const *fr, size_t n, bool *mp);

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
