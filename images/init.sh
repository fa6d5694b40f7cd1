#!/bin/sh
# /init of the vgpu test initramfs (busybox sh, PID 1). Embedded into the images package.
#
# It mounts /proc, /sys and /dev, loads the virtio modules listed in /lib/modules/load.order
# (virtio_ring ... virtio_console; files that are not there are built into the kernel), finds the
# virtio-serial port named "results", loads /lib/modules/vgpu_test.ko, waits for the module's
# "# vgpu_test: done" line, copies the KTAP block from the kernel log, unloads the module and
# reports. The report goes to the console (ttyS0) and to the results port:
#
#   KTAP version 1 ... # vgpu_test: done pass=X fail=Y skip=Z   (printk timestamps removed)
#   # vgpu-init: insmod rc=N
#   # vgpu-init: rmmod rc=N
#   # vgpu-init: irqs-after-rmmod=N        (/proc/interrupts lines naming vgpu)
#   # vgpu-init: kernel-warnings=N         (WARNING/BUG/Oops lines in the kernel log)
#   # vgpu-init: tainted=N                 (/proc/sys/kernel/tainted)
#   # vgpu-init: uptime init=A end=B       (guest seconds when /init started and finished)
#   # vgpu-init: end
#
# plus "# vgpu-init: note: ..." lines when something is missing or fails. Then it powers off,
# unless vgpu_keep=1.
#
# The whole kernel log goes, live, to a second virtio-serial port named "kmsg" when there is one
# (cat /dev/kmsg: every record from boot, whatever the console log level).
#
# A user run (the initramfs has /etc/vgpu-run/plan; `vgpu run --module/--run/--add`) replaces
# steps 3 and 4: no vgpu_test.ko, no waiting for its done line. /init loads the modules listed
# in /etc/vgpu-run/modules ("NAME PATH ARGS..." lines, in order; NAME.PARAM=VALUE words of the
# kernel command line come first, as modprobe does it), runs each /etc/vgpu-run/run/NNN
# with sh (output to the console and, framed, into the report), unloads what it loaded in
# reverse order and reports:
#
#   # vgpu-init: begin module NAME / begin run N / begin unload NAME   (console only)
#   # vgpu-init: module NAME rc=N cs=T     (T: centiseconds the insmod took)
#   # vgpu-init: out N: LINE               (each output line of run N, also of insmod: N=m-NAME)
#   # vgpu-init: run N rc=R cs=T           (R "skipped" when a module failed to load)
#   # vgpu-init: unload NAME rc=N
#   # vgpu-init: irqs NAME=N               (/proc/interrupts lines naming NAME after its rmmod)
#
# then the same kernel-warnings/tainted/uptime/end lines. A user run's steps are not bounded
# here: the host's --timeout ends a stuck one, and names it from the "begin" lines.
# The suite's waits are bounded: a missing module, a missing device or a stuck insmod still ends
# with "# vgpu-init: end" and a power-off.
#
# The DRM suite (the initramfs has /etc/vgpu-suite saying "drm": the generic kernel's image)
# replaces steps 3 and 4 too: /init loads the kernel's DRM modules listed in
# /lib/modules/drm/load.order (dependencies first), then /lib/modules/vgpu_drm.ko, mounts
# debugfs at /sys/kernel/debug (devtmpfs is at /dev already), waits for /dev/dri/renderD128,
# runs /bin/vgpu-drmtest $vgpu_test_args --iommu-mode on|off (on when the kernel runs with
# intel_iommu=on) and sends its standard output, a KTAP document, as the report's KTAP block;
# its standard error becomes notes. Then it unloads vgpu_drm and reports:
#
#   # vgpu-init: kmod NAME rc=N            (each DRM module of the kernel)
#   # vgpu-init: drm-kmods rc=N            (0 when every one loaded)
#   # vgpu-init: drm-insmod rc=N           (vgpu_drm.ko; "none" when not tried)
#   # vgpu-init: render-node=PATH|none
#   # vgpu-init: drmtest rc=N              (the program's exit status, or timeout)
#   # vgpu-init: drm-rmmod rc=N
#   # vgpu-init: irqs-after-rmmod=N
#
# then the same kernel-warnings/tainted/uptime/end lines. vgpu_drmtest_wait=N bounds the
# program (seconds, default 180).
#
# Kernel command line parameters that the kernel does not know are handed to /init as
# environment variables:
#   vgpu_test_args="tests=dma,msix timeout_ms=5000"   module parameters for vgpu_test.ko
#   vgpu_wait=120          seconds to wait for insmod and the done line (default 120)
#   vgpu_keep=1            start an interactive shell on the console instead of powering off
#   vgpu_no_test=1         do not load vgpu_test.ko (boot check only)

export PATH=/bin
umask 022
P='# vgpu-init: '
REPORT=/run/report

mount -t proc proc /proc
read -r T_INIT _ </proc/uptime
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs -o mode=0755 tmpfs /run 2>/dev/null
: >"$REPORT"

# say LINE...: one line to the console and into the report.
say() {
	echo "$*"
	echo "$*" >>"$REPORT"
}

# note TEXT...: a free-text "# vgpu-init: note: ..." line (never mistaken for a result line).
note() { say "${P}note: $*"; }

# now: seconds since boot (whole seconds).
now() {
	read -r up _ </proc/uptime
	echo "${up%.*}"
}

# run_bounded SECONDS NAME CMD...: runs CMD in the background with its output in /run/NAME.out
# and its exit status in /run/NAME.rc; waits at most SECONDS. Prints the status, or "timeout".
run_bounded() {
	limit=$1 name=$2
	shift 2
	rm -f "/run/$name.rc"
	# Everything redirected: the caller reads our stdout through $(...), which would otherwise
	# wait for a stuck command to close it.
	(
		"$@" >"/run/$name.out" 2>&1 </dev/null
		echo $? >"/run/$name.rc.tmp"
		mv "/run/$name.rc.tmp" "/run/$name.rc"
	) >/dev/null 2>&1 </dev/null &
	t0=$(now)
	while [ ! -f "/run/$name.rc" ]; do
		if [ $(($(now) - t0)) -ge "$limit" ]; then
			echo timeout
			return
		fi
		sleep 0.05
	done
	cat "/run/$name.rc"
}

# note_output NAME: the captured output of a run_bounded command, as notes.
note_output() {
	[ -s "/run/$1.out" ] || return 0
	while IFS= read -r line; do note "$1: $line"; done <"/run/$1.out"
}

ktap() {
	dmesg | sed -e 's/^\[[ 0-9.]*\] //' | sed -n '/^KTAP version 1$/,/^# vgpu_test: done/p'
}

WAIT=${vgpu_wait:-120}
case "$WAIT" in '' | *[!0-9]*) WAIT=120 ;; esac

# 1. virtio: console modules in dependency order (there is no modules.dep).
if [ -f /lib/modules/load.order ]; then
	while read -r m; do
		[ -n "$m" ] || continue
		[ -f "/lib/modules/$m.ko" ] || continue
		out=$(insmod "/lib/modules/$m.ko" 2>&1) || note "insmod $m failed: $out"
	done </lib/modules/load.order
fi

# 2. The results port. Wait for it only when a virtio console device exists (its ports appear
# shortly after the driver binds).
port=
kport=
kpid=
has_console=
for d in /sys/bus/virtio/devices/*; do
	[ "$(cat "$d/device" 2>/dev/null)" = 0x0003 ] && has_console=1
done
if [ -n "$has_console" ]; then
	i=0
	while [ $i -lt 100 ]; do
		for n in /sys/class/virtio-ports/vport*/name; do
			[ -r "$n" ] || continue
			d=${n%/name}
			case "$(cat "$n")" in
			results) port=/dev/${d##*/} ;;
			kmsg) kport=/dev/${d##*/} ;;
			esac
		done
		# The kmsg port appears with the results port; a host without one is waited for briefly.
		if [ -n "$port" ] && [ -c "$port" ]; then
			[ -n "$kport" ] && [ -c "$kport" ] && break
			ready=$((${ready:-0} + 1))
			[ "$ready" -ge 10 ] && break
		else
			port=
		fi
		kport=
		sleep 0.05
		i=$((i + 1))
	done
	[ -n "$port" ] || note "no virtio-serial port named results"
else
	note "no virtio console device: results on the console only"
fi
if [ -n "$kport" ] && [ -c "$kport" ]; then
	# From the first record in the buffer (boot), live, until the end of the run.
	cat /dev/kmsg >"$kport" 2>/dev/null </dev/null &
	kpid=$!
fi

# centis: hundredths of a second since boot.
centis() {
	read -r up _ </proc/uptime
	# "1xx - 100": the two decimals without a leading 0 that would make them octal.
	echo $((${up%.*} * 100 + 1${up#*.} - 100))
}

# frame TAG FILE: each line of FILE as a "# vgpu-init: out TAG: LINE" report line.
frame() {
	[ -s "$2" ] || return 0
	sed "s/^/${P}out $1: /" "$2" >>"$REPORT"
}

# cmdline_params NAME: the NAME.PARAM=VALUE words of the kernel command line, as PARAM=VALUE
# (what modprobe adds to a module's parameters; busybox insmod does not).
cmdline_params() {
	read -r cl </proc/cmdline
	for w in $cl; do
		case "$w" in "$1".*=*) printf '%s ' "${w#"$1".}" ;; esac
	done
}

# The user's plan: modules, commands, unload.
user_run() {
	R=/etc/vgpu-run
	/bin/busybox --install -s /bin 2>/dev/null
	export HOME=/root
	loaded=
	failed=
	set -f # module arguments are words, not patterns
	while read -r name path args; do
		[ -n "$name" ] || continue
		echo "${P}begin module $name"
		t0=$(centis)
		# shellcheck disable=SC2086 # the arguments are words
		insmod "$path" $(cmdline_params "$name") $args >"/run/m-$name.out" 2>&1 </dev/null
		mrc=$?
		cat "/run/m-$name.out"
		frame "m-$name" "/run/m-$name.out"
		say "${P}module $name rc=$mrc cs=$(($(centis) - t0))"
		if [ "$mrc" = 0 ]; then
			loaded="$name $loaded"
		else
			failed=$name
		fi
	done <"$R/modules"
	set +f
	for f in "$R"/run/*; do
		[ -f "$f" ] || continue
		n=${f##*/}
		n=$(echo "$n" | sed 's/^0*//')
		if [ -n "$failed" ]; then
			say "${P}run $n rc=skipped cs=0"
			continue
		fi
		echo "${P}begin run $n"
		t0=$(centis)
		rm -f "/run/run-$n.rc"
		(
			cd / && sh "$f" </dev/null 2>&1
			echo $? >"/run/run-$n.rc"
		) | tee "/run/run-$n.out"
		t1=$(centis)
		frame "$n" "/run/run-$n.out"
		say "${P}run $n rc=$(cat "/run/run-$n.rc" 2>/dev/null || echo lost) cs=$((t1 - t0))"
	done
	for name in $loaded; do
		echo "${P}begin unload $name"
		rmmod "$name" >"/run/u-$name.out" 2>&1 </dev/null
		urc=$?
		frame "u-$name" "/run/u-$name.out"
		say "${P}unload $name rc=$urc"
		say "${P}irqs $name=$(grep -c -w "$name" /proc/interrupts)"
	done
}

# The DRM suite: the kernel's DRM modules, vgpu_drm.ko, the userspace program.
drm_suite() {
	D=/lib/modules/drm
	kmods=0
	while read -r m; do
		[ -n "$m" ] || continue
		krc=$(run_bounded 60 "kmod-$m" insmod "$D/$m.ko")
		say "${P}kmod $m rc=$krc"
		if [ "$krc" != 0 ]; then
			note_output "kmod-$m"
			[ "$kmods" = 0 ] && kmods=$krc
		fi
	done <"$D/load.order"
	say "${P}drm-kmods rc=$kmods"
	mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
	grep -q ' /dev devtmpfs ' /proc/mounts || note "devtmpfs is not mounted at /dev: no render node"

	ko=/lib/modules/vgpu_drm.ko
	rc=none
	if [ "$vgpu_no_test" = 1 ]; then
		note "vgpu_no_test=1: not loading vgpu_drm.ko"
	elif [ "$kmods" != 0 ]; then
		note "a DRM module failed to load: not loading vgpu_drm.ko"
	elif [ ! -f "$ko" ]; then
		note "$ko missing"
	else
		rc=$(run_bounded "$WAIT" insmod insmod "$ko")
		note_output insmod
	fi
	say "${P}drm-insmod rc=$rc"

	node=none
	prc=none
	if [ "$rc" = 0 ]; then
		# The driver registers the render node at probe; devtmpfs creates it soon after.
		i=0
		while [ $i -lt 100 ]; do
			if [ -c /dev/dri/renderD128 ]; then
				node=/dev/dri/renderD128
				break
			fi
			sleep 0.05
			i=$((i + 1))
		done
		say "${P}render-node=$node"
		mode=off
		read -r cl </proc/cmdline
		for w in $cl; do [ "$w" = intel_iommu=on ] && mode=on; done
		dwait=${vgpu_drmtest_wait:-180}
		case "$dwait" in '' | *[!0-9]*) dwait=180 ;; esac
		# shellcheck disable=SC2086 # the arguments are words
		/bin/vgpu-drmtest $vgpu_test_args --iommu-mode "$mode" >/run/drmtest.ktap 2>/run/drmtest.err </dev/null &
		ppid=$!
		t0=$(now)
		timed_out=
		while kill -0 "$ppid" 2>/dev/null; do
			if [ $(($(now) - t0)) -ge "$dwait" ]; then
				note "vgpu-drmtest did not finish within ${dwait}s: killed"
				kill -9 "$ppid" 2>/dev/null
				timed_out=1
				break
			fi
			sleep 0.1
		done
		wait "$ppid"
		prc=$?
		[ -z "$timed_out" ] || prc=timeout
	fi
	if [ -s /run/drmtest.ktap ]; then
		cat /run/drmtest.ktap
		cat /run/drmtest.ktap >>"$REPORT"
		# A document cut short must not swallow the lines that follow.
		[ -z "$(tail -c 1 /run/drmtest.ktap)" ] || say ""
	elif [ "$prc" != none ]; then
		note "vgpu-drmtest printed nothing on its standard output"
	fi
	if [ -s /run/drmtest.err ]; then
		head -n 200 /run/drmtest.err | while IFS= read -r line; do note "vgpu-drmtest: $line"; done
	fi
	say "${P}drmtest rc=$prc"

	rrc=none
	if [ "$rc" = 0 ] || grep -q '^vgpu_drm ' /proc/modules 2>/dev/null; then
		rrc=$(run_bounded 30 rmmod rmmod vgpu_drm)
		note_output rmmod
	fi
	say "${P}drm-rmmod rc=$rrc"
	irqs=$(grep -c vgpu /proc/interrupts)
	say "${P}irqs-after-rmmod=${irqs:-0}"
}

suite=
[ -f /etc/vgpu-suite ] && read -r suite </etc/vgpu-suite
if [ -f /etc/vgpu-run/plan ]; then
	user_run
elif [ "$suite" = drm ]; then
	drm_suite
else
	# 3. The test module.
	ko=/lib/modules/vgpu_test.ko
	rc=none
	if [ "$vgpu_no_test" = 1 ]; then
		note "vgpu_no_test=1: not loading vgpu_test.ko"
	elif [ ! -f "$ko" ]; then
		note "$ko missing"
	else
		# shellcheck disable=SC2086 # the arguments are words
		rc=$(run_bounded "$WAIT" insmod insmod "$ko" $vgpu_test_args)
		t0=$(now)
		if [ "$rc" = 0 ]; then
			# Probing is synchronous, so the done line is normally there already; a device that
			# appears later (hot-plug) reports when it binds.
			until dmesg | grep -q '# vgpu_test: done'; do
				if [ $(($(now) - t0)) -ge "$WAIT" ]; then
					note "no '# vgpu_test: done' line after ${WAIT}s"
					break
				fi
				sleep 0.1
			done
		fi
	fi

	ktap >/run/ktap
	if [ -s /run/ktap ]; then
		cat /run/ktap
		cat /run/ktap >>"$REPORT"
	elif [ "$rc" != none ]; then
		note "no KTAP output; kernel log lines naming vgpu_test:"
		dmesg | grep 'vgpu_test:' | while IFS= read -r line; do note "  $line"; done
	fi
	[ "$rc" = none ] || note_output insmod
	say "${P}insmod rc=$rc"

	# 4. Unload: remove() must free every IRQ and stop DMA.
	rrc=none
	if [ "$rc" = 0 ] || grep -q '^vgpu_test ' /proc/modules 2>/dev/null; then
		rrc=$(run_bounded 30 rmmod rmmod vgpu_test)
		note_output rmmod
	fi
	say "${P}rmmod rc=$rrc"
	irqs=$(grep -c vgpu /proc/interrupts)
	say "${P}irqs-after-rmmod=${irqs:-0}"
fi
warn=$(dmesg | grep -c -E 'WARNING:|BUG:|Oops|general protection|Call Trace:')
say "${P}kernel-warnings=${warn:-0}"
say "${P}tainted=$(cat /proc/sys/kernel/tainted)"
read -r t_end _ </proc/uptime
say "${P}uptime init=${T_INIT}s end=${t_end}s"
say "$P"end

# 5. Results to the host. Bounded: a port whose host side is gone must not hang the guest.
if [ -n "$port" ]; then
	timeout 10 sh -c 'cat "$1" >"$2"' sh "$REPORT" "$port" ||
		echo "${P}note: writing the report to $port failed"
fi
if [ -n "$kpid" ]; then
	sleep 0.2 # the last records reach the port
	kill "$kpid" 2>/dev/null
fi

if [ "$vgpu_keep" = 1 ]; then
	/bin/busybox --install -s /bin 2>/dev/null
	echo "vgpu-init: vgpu_keep=1: shell on the console; 'poweroff -f' ends the VM"
	setsid cttyhack sh -l
fi
sync
poweroff -f
