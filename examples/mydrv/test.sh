#!/bin/sh
# The userspace half of the example: runs in the guest (busybox sh) after mydrv.ko is loaded.
# It checks that the driver bound the GPU and that /dev/mydrv reports the device's magic.
set -e
want=0x55504756
ls /sys/bus/pci/drivers/mydrv/ | grep -q ':' || { echo "mydrv is bound to no device"; exit 1; }
got=$(cat /dev/mydrv)
echo "read: $got"
[ "$got" = "magic=$want" ] || { echo "want magic=$want"; exit 1; }
echo "mydrv test: ok"
