// SPDX-License-Identifier: GPL-2.0
/*
 * What the inject_* cases share: the module parameter that says the device runs with their
 * rules (see inject.h).
 */

#include <linux/kernel.h>
#include <linux/moduleparam.h>

#include "inject.h"

bool inject_rules;
module_param(inject_rules, bool, 0444);
MODULE_PARM_DESC(inject_rules,
		 "The device runs with the fault-injection rules of the inject_* cases (vgpu run sets it for their boots)");

bool vt_inject_skip(struct vt_case *t, const char *rule, enum vt_res *res)
{
	if (inject_rules)
		return false;
	snprintf(t->why, sizeof(t->why),
		 "needs injection: the device must run with --inject '%s' (vgpu run boots it so)", rule);
	*res = VT_SKIP;
	return true;
}
