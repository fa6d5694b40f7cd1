// SPDX-License-Identifier: GPL-2.0
/*
 * KTAP version 1 output helpers (see ktap.h).
 */

#include <linux/kernel.h>
#include <linux/printk.h>
#include <linux/stdarg.h>

#include "ktap.h"

void vt_print_result(struct vt_log *l, enum vt_res res, const char *name,
		     const char *why)
{
	l->n++;
	switch (res) {
	case VT_PASS:
		l->pass++;
		pr_info("%sok %u %s\n", l->indent, l->n, name);
		break;
	case VT_SKIP:
		l->skip++;
		pr_info("%sok %u %s # SKIP %s\n", l->indent, l->n, name, why);
		break;
	case VT_FAIL:
		l->fail++;
		pr_info("%snot ok %u %s # %s\n", l->indent, l->n, name,
			why[0] ? why : "failed");
		break;
	}
}

__printf(2, 3) void vt_diag(const char *indent, const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	pr_info("%s# %pV\n", indent, &vaf);
	va_end(args);
}

/* A diagnostic line at the case's current nesting level. */
__printf(2, 3) void vt_note(struct vt_case *t, const char *fmt, ...)
{
	struct va_format vaf;
	va_list args;

	va_start(args, fmt);
	vaf.fmt = fmt;
	vaf.va = &args;
	pr_info("%s# %pV\n", t->has_sub ? VT_INDENT : "", &vaf);
	va_end(args);
}

/* Records the case's failure reason (the first one wins) and returns VT_FAIL. */
__printf(2, 3) enum vt_res vt_fail(struct vt_case *t, const char *fmt, ...)
{
	va_list args;

	if (!t->why[0]) {
		va_start(args, fmt);
		vsnprintf(t->why, sizeof(t->why), fmt, args);
		va_end(args);
	}
	return VT_FAIL;
}

/* Records why a helper failed (the last one wins; t may be NULL) and returns ret. */
__printf(3, 4) int vt_reason(struct vt_case *t, int ret, const char *fmt, ...)
{
	va_list args;

	if (t) {
		va_start(args, fmt);
		vsnprintf(t->err, sizeof(t->err), fmt, args);
		va_end(args);
	}
	return ret;
}

void vt_sub_begin(struct vt_case *t, unsigned int plan)
{
	t->has_sub = true;
	t->sub = (struct vt_log){ .indent = VT_INDENT, .plan = plan };
	pr_info(VT_INDENT "KTAP version 1\n");
	pr_info(VT_INDENT "# Subtest: %s\n", t->name);
	pr_info(VT_INDENT "1..%u\n", plan);
}

/* Prints one subtest result; the reason is formatted only on failure. Returns ok. */
__printf(4, 5) bool vt_check(struct vt_case *t, bool ok, const char *name,
			     const char *fmt, ...)
{
	char why[VT_WHY_LEN];
	va_list args;

	if (ok) {
		vt_print_result(&t->sub, VT_PASS, name, "");
		return true;
	}
	va_start(args, fmt);
	vsnprintf(why, sizeof(why), fmt, args);
	va_end(args);
	vt_print_result(&t->sub, VT_FAIL, name, why);
	return false;
}

void vt_sub_skip(struct vt_case *t, const char *const *names, unsigned int count,
		 const char *why)
{
	unsigned int i;

	for (i = 0; i < count; i++)
		vt_print_result(&t->sub, VT_SKIP, names[i], why);
}

/* Every subtest of a case that could not get its resources fails with the same reason. */
void vt_sub_fail_all(struct vt_case *t, const char *const *names, unsigned int count)
{
	unsigned int i;

	for (i = 0; i < count; i++)
		vt_check(t, false, names[i], "%s", t->err);
}

/* Folds a case's subtests into its own result. */
enum vt_res vt_case_end(struct vt_case *t, enum vt_res res)
{
	if (!t->has_sub)
		return res;
	if (t->sub.n != t->sub.plan)
		return vt_fail(t, "internal error: plan 1..%u but %u subtest results",
			       t->sub.plan, t->sub.n);
	if (t->sub.fail)
		return vt_fail(t, "%u of %u subtests failed", t->sub.fail, t->sub.plan);
	return res;
}
