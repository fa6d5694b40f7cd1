/* SPDX-License-Identifier: GPL-2.0 */
/*
 * KTAP version 1 output: the top-level report (main.c) runs one case at a time; a case may
 * print nested subtests. Every line is one pr_info.
 */
#ifndef VT_KTAP_H
#define VT_KTAP_H

#include <linux/compiler.h>
#include <linux/types.h>

#define VT_WHY_LEN		160
#define VT_INDENT		"    "	/* KTAP: one nesting level */

struct vgpu;

enum vt_res { VT_PASS, VT_FAIL, VT_SKIP };

struct vt_log {
	const char *indent;
	unsigned int plan, n, pass, fail, skip;
};

/* One top-level case while it runs. */
struct vt_case {
	struct vgpu *vg;
	const char *name;
	bool has_sub;
	struct vt_log sub;	/* its nested subtests, when has_sub */
	char why[VT_WHY_LEN];	/* reason printed after "not ok" */
	char err[VT_WHY_LEN];	/* why the last helper failed, for a subtest's reason */
};

void vt_print_result(struct vt_log *l, enum vt_res res, const char *name, const char *why);
__printf(2, 3) void vt_diag(const char *indent, const char *fmt, ...);
__printf(2, 3) void vt_note(struct vt_case *t, const char *fmt, ...);
__printf(2, 3) enum vt_res vt_fail(struct vt_case *t, const char *fmt, ...);
__printf(3, 4) int vt_reason(struct vt_case *t, int ret, const char *fmt, ...);
void vt_sub_begin(struct vt_case *t, unsigned int plan);
__printf(4, 5) bool vt_check(struct vt_case *t, bool ok, const char *name, const char *fmt, ...);
void vt_sub_skip(struct vt_case *t, const char *const *names, unsigned int count,
		 const char *why);
void vt_sub_fail_all(struct vt_case *t, const char *const *names, unsigned int count);
enum vt_res vt_case_end(struct vt_case *t, enum vt_res res);

#endif /* VT_KTAP_H */
