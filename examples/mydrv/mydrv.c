// SPDX-License-Identifier: GPL-2.0
/*
 * mydrv: the smallest driver for vgpu's virtual GPU, as a user of vgpu would start one.
 *
 * It binds 1234:5650, maps the register BAR, reads ID_MAGIC and offers it to userspace as the
 * misc device /dev/mydrv: reading it gives "magic=0x55504756\n". With warn=1 it WARNs in probe
 * (to see what a kernel splat does to a `vgpu run` verdict).
 *
 * The numbers are those of docs/device.md; a real driver would include guest/include/vgpu_abi.h.
 */
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/pci.h>

#define MYDRV_VENDOR 0x1234
#define MYDRV_DEVICE 0x5650
#define MYDRV_BAR_REGS 5
#define MYDRV_REG_ID_MAGIC 0x0
#define MYDRV_MAGIC 0x55504756 /* "VGPU" */

static bool warn;
module_param(warn, bool, 0444);
MODULE_PARM_DESC(warn, "WARN_ON in probe (for testing the harness)");

struct mydrv {
	void __iomem *regs;
	u32 magic;
	struct miscdevice misc;
};

static ssize_t mydrv_read(struct file *f, char __user *buf, size_t len, loff_t *pos)
{
	struct mydrv *md = container_of(f->private_data, struct mydrv, misc);
	char s[32];
	int n = scnprintf(s, sizeof(s), "magic=%#010x\n", md->magic);

	return simple_read_from_buffer(buf, len, pos, s, n);
}

static const struct file_operations mydrv_fops = {
	.owner = THIS_MODULE,
	.read = mydrv_read,
	.llseek = default_llseek,
};

static int mydrv_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct mydrv *md;
	int ret;

	md = devm_kzalloc(&pdev->dev, sizeof(*md), GFP_KERNEL);
	if (!md)
		return -ENOMEM;
	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	ret = pcim_iomap_regions(pdev, BIT(MYDRV_BAR_REGS), "mydrv");
	if (ret)
		return ret;
	md->regs = pcim_iomap_table(pdev)[MYDRV_BAR_REGS];
	dev_dbg(&pdev->dev, "BAR%d mapped\n", MYDRV_BAR_REGS); /* shown with dyndbg */
	md->magic = readl(md->regs + MYDRV_REG_ID_MAGIC);
	dev_info(&pdev->dev, "ID_MAGIC=%#010x%s\n", md->magic,
		 md->magic == MYDRV_MAGIC ? "" : " (unexpected)");
	WARN_ON(warn);

	md->misc.minor = MISC_DYNAMIC_MINOR;
	md->misc.name = "mydrv";
	md->misc.fops = &mydrv_fops;
	md->misc.parent = &pdev->dev;
	ret = misc_register(&md->misc);
	if (ret)
		return ret;
	pci_set_drvdata(pdev, md);
	return 0;
}

static void mydrv_remove(struct pci_dev *pdev)
{
	struct mydrv *md = pci_get_drvdata(pdev);

	misc_deregister(&md->misc);
	dev_info(&pdev->dev, "removed\n");
}

static const struct pci_device_id mydrv_ids[] = {
	{ PCI_DEVICE(MYDRV_VENDOR, MYDRV_DEVICE) },
	{}
};
MODULE_DEVICE_TABLE(pci, mydrv_ids);

static struct pci_driver mydrv_driver = {
	.name = "mydrv",
	.id_table = mydrv_ids,
	.probe = mydrv_probe,
	.remove = mydrv_remove,
};
module_pci_driver(mydrv_driver);

MODULE_DESCRIPTION("Example driver for the vgpu virtual GPU");
MODULE_LICENSE("GPL");
