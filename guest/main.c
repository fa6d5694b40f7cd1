// SPDX-License-Identifier: GPL-2.0
/*
 * vgpu_test: in-guest self-test driver for the vgpu virtual PCIe GPU.
 *
 * It binds to the device the way a real GPU driver does (regions, BAR mappings, bus mastering,
 * a 64-bit DMA mask, every MSI-X vector with its own handler, coherent DMA buffers), runs the
 * selected test cases from probe and prints the results to the kernel log as KTAP version 1,
 * ending with "# vgpu_test: done pass=X fail=Y skip=Z". Failed cases do not fail the probe or
 * the module load: the KTAP results carry the verdict, and the module can be unloaded again.
 *
 * The programming model is docs/device.md; every register and constant comes from the
 * generated include/vgpu_abi.h.
 */

#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/string.h>

#include "cases.h"
#include "vgpu.h"

static char *tests = "all";
module_param(tests, charp, 0444);
MODULE_PARM_DESC(tests, "Comma-separated test cases to run, or \"all\" (default: all)");

static ushort vendor = VGPU_PCI_VENDOR_ID;
module_param(vendor, ushort, 0444);
MODULE_PARM_DESC(vendor, "PCI vendor ID to bind to (default: 0x1234)");

static ushort device = VGPU_PCI_DEVICE_ID;
module_param(device, ushort, 0444);
MODULE_PARM_DESC(device, "PCI device ID to bind to (default: 0x5650)");

uint timeout_ms = 2000;
module_param(timeout_ms, uint, 0444);
MODULE_PARM_DESC(timeout_ms, "Timeout of every interrupt and DMA wait, in ms (default: 2000)");

uint fence_jobs = 10000;
module_param(fence_jobs, uint, 0444);
MODULE_PARM_DESC(fence_jobs, "Jobs the fences case runs across its 4 queues (default: 10000)");

uint job_timeout_ms = 1000;
module_param(job_timeout_ms, uint, 0444);
MODULE_PARM_DESC(job_timeout_ms, "Job timeout of the hang recovery cases, in ms (default: 1000)");

/* Bit i set: vt_defs[i] runs. */
static unsigned long vt_selected;
/* Probes seen, to report a missing device. */
static atomic_t vt_probes = ATOMIC_INIT(0);
/* One device's KTAP report at a time. */
static DEFINE_MUTEX(vt_lock);

static const struct vt_def {
	const char *name;
	enum vt_res (*run)(struct vt_case *t);
} vt_defs[] = {
	{ "probe_identity", t_probe_identity },
	{ "scratch", t_scratch },
	{ "msix", t_msix },
	{ "dma", t_dma },
	{ "vram", t_vram },
	{ "reset_flr", t_reset_flr },
	{ "ring_test", t_ring_test },
	{ "ib_test", t_ib_test },
	{ "ib2_chain", t_ib2_chain },
	{ "fences", t_fences },
	{ "semaphore", t_semaphore },
	{ "dma_data", t_dma_data },
	{ "cache", t_cache },
	{ "bad_packet", t_bad_packet },
	{ "ring_wrap", t_ring_wrap },
	{ "hang_queue_reset", t_hang_queue_reset },
	{ "hang_engine_reset", t_hang_engine_reset },
	{ "hang_flr", t_hang_flr },
	{ "vm_isolation", t_vm_isolation },
	{ "huge_pages", t_huge_pages },
	{ "permission", t_permission },
	{ "stale_tlb", t_stale_tlb },
	{ "invalidate_packet", t_invalidate_packet },
	{ "retry_fault", t_retry_fault },
	{ "fault_storm", t_fault_storm },
	{ "no_retry", t_no_retry },
	{ "prt", t_prt },
	{ "mes_bringup", t_mes_bringup },
	{ "mes_add_remove", t_mes_add_remove },
	{ "mes_oversubscribe", t_mes_oversubscribe },
	{ "mes_priority", t_mes_priority },
	{ "mes_fairness", t_mes_fairness },
	{ "mes_unmapped_doorbell", t_mes_unmapped_doorbell },
	{ "mes_suspend_resume", t_mes_suspend_resume },
	{ "mes_hang", t_mes_hang },
	{ "mes_bad_frames", t_mes_bad_frames },
	{ "mes_vmid_oversubscribe", t_mes_vmid_oversubscribe },
	{ "protected_fence", t_protected_fence },
	{ "shader_vector_add", t_shader_vector_add },
	{ "shader_atomics", t_shader_atomics },
	{ "shader_ids_2d", t_shader_ids_2d },
	{ "shader_bad", t_shader_bad },
	{ "shader_preempt", t_shader_preempt },
	{ "shader_endless", t_shader_endless },
	{ "shader_hazard", t_shader_hazard },
	{ "shader_l0_stale", t_shader_l0_stale },
	{ "shader_retry_fault", t_shader_retry_fault },
	{ "inject_eop_lost", t_inject_eop_lost },
	{ "inject_mes_hang", t_inject_mes_hang },
	{ "inject_dma_fail", t_inject_dma_fail },
};

/*
 * Prints one complete KTAP report. With setup_err set (or no device) every selected case
 * fails with that reason; vg is then not used.
 */
static void vgpu_report(struct vgpu *vg, struct pci_dev *pdev, const char *setup_err)
{
	struct vt_log top = { .indent = "", .plan = ARRAY_SIZE(vt_defs) };
	struct vt_case *t;
	unsigned int i;
	ktime_t start;

	/* Allocated before the report starts, so no allocation message lands inside it. */
	t = kzalloc(sizeof(*t), GFP_KERNEL);

	mutex_lock(&vt_lock);
	pr_info("KTAP version 1\n");
	pr_info("1..%u\n", top.plan);
	if (pdev)
		vt_diag("", "vgpu_test: device %s [%04x:%04x] tests=%s timeout_ms=%u",
			pci_name(pdev), pdev->vendor, pdev->device, tests, timeout_ms);
	if (!t)
		setup_err = "out of memory";

	for (i = 0; i < ARRAY_SIZE(vt_defs); i++) {
		const struct vt_def *def = &vt_defs[i];
		enum vt_res res;

		if (!(vt_selected & BIT(i))) {
			vt_print_result(&top, VT_SKIP, def->name, "not selected");
			continue;
		}
		if (setup_err) {
			vt_print_result(&top, VT_FAIL, def->name, setup_err);
			continue;
		}
		memset(t, 0, sizeof(*t));
		t->vg = vg;
		t->name = def->name;
		start = ktime_get();
		res = def->run(t);
		vt_note(t, "%s: %lld ms", def->name, ktime_ms_delta(ktime_get(), start));
		res = vt_case_end(t, res);
		vt_print_result(&top, res, def->name, t->why);
	}
	pr_info("# vgpu_test: done pass=%u fail=%u skip=%u\n", top.pass, top.fail, top.skip);
	mutex_unlock(&vt_lock);
	kfree(t);
}

static int vgpu_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	char why[VT_WHY_LEN], err[VT_WHY_LEN + 16];
	struct vgpu *vg;
	int ret;

	atomic_inc(&vt_probes);
	vg = kzalloc(sizeof(*vg), GFP_KERNEL);
	if (!vg) {
		vgpu_report(NULL, pdev, "setup failed: out of memory");
		return -ENOMEM;
	}
	vg->pdev = pdev;
	init_waitqueue_head(&vg->wq);

	why[0] = '\0';
	ret = vgpu_setup(vg, why, sizeof(why));
	if (ret) {
		dev_err(&pdev->dev, "setup failed: %s\n", why);
		snprintf(err, sizeof(err), "setup failed: %s", why);
		vgpu_report(NULL, pdev, err);
		kfree(vg);
		return ret;
	}
	pci_set_drvdata(pdev, vg);
	vgpu_report(vg, pdev, NULL);
	return 0;
}

static void vgpu_remove(struct pci_dev *pdev)
{
	struct vgpu *vg = pci_get_drvdata(pdev);

	vgpu_teardown(vg);
	pci_set_drvdata(pdev, NULL);
	kfree(vg);
}

/* Not const: module init writes the vendor/device parameters into it. */
static struct pci_device_id vgpu_ids[] = {
	{ PCI_DEVICE(VGPU_PCI_VENDOR_ID, VGPU_PCI_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, vgpu_ids);

static struct pci_driver vgpu_driver = {
	.name = KBUILD_MODNAME,
	.id_table = vgpu_ids,
	.probe = vgpu_probe,
	.remove = vgpu_remove,
	.driver = {
		/* The report must be complete when insmod returns. */
		.probe_type = PROBE_FORCE_SYNCHRONOUS,
	},
};

/* Sets vt_selected from the tests parameter; an unknown name is an error. */
static int vt_parse_tests(void)
{
	char *buf, *s, *tok, known[512];
	unsigned int i, n = 0;
	int ret = 0;

	BUILD_BUG_ON(ARRAY_SIZE(vt_defs) > BITS_PER_LONG);
	for (i = 0; i < ARRAY_SIZE(vt_defs); i++)
		n += scnprintf(known + n, sizeof(known) - n, "%s%s", i ? ", " : "",
			       vt_defs[i].name);
	vt_selected = 0;
	if (!tests || !strcmp(tests, "all")) {
		vt_selected = BIT(ARRAY_SIZE(vt_defs)) - 1;
		return 0;
	}
	buf = kstrdup(tests, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	s = buf;
	while ((tok = strsep(&s, ",")) != NULL) {
		tok = strim(tok);
		if (!*tok)
			continue;
		if (!strcmp(tok, "all")) {
			vt_selected = BIT(ARRAY_SIZE(vt_defs)) - 1;
			continue;
		}
		for (i = 0; i < ARRAY_SIZE(vt_defs); i++) {
			if (!strcmp(tok, vt_defs[i].name))
				break;
		}
		if (i == ARRAY_SIZE(vt_defs)) {
			pr_err("vgpu_test: unknown test \"%s\" in tests=; known: %s\n", tok, known);
			ret = -EINVAL;
			continue;
		}
		vt_selected |= BIT(i);
	}
	kfree(buf);
	return ret;
}

static int __init vgpu_test_init(void)
{
	char why[48];
	int ret;

	ret = vt_parse_tests();
	if (ret)
		return ret;
	if (timeout_ms < 10)
		timeout_ms = 10;
	if (job_timeout_ms < 10)
		job_timeout_ms = 10;
	vgpu_ids[0].vendor = vendor;
	vgpu_ids[0].device = device;

	ret = pci_register_driver(&vgpu_driver);
	if (ret)
		return ret;
	if (!atomic_read(&vt_probes)) {
		snprintf(why, sizeof(why), "no unbound device %04x:%04x found", vendor, device);
		vgpu_report(NULL, NULL, why);
	}
	return 0;
}

static void __exit vgpu_test_exit(void)
{
	pci_unregister_driver(&vgpu_driver);
}

module_init(vgpu_test_init);
module_exit(vgpu_test_exit);

MODULE_DESCRIPTION("vgpu virtual GPU in-guest self-test driver (KTAP)");
MODULE_LICENSE("GPL");
