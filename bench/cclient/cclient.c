// cclient: a minimal vfio-user client in C that times trapped REGION_READ round trips, and the
// raw unix-socket echo of the same message sizes as their floor. bench/cclient.go builds it
// with gcc at bench time and runs it pinned to the CPU the server runs on: with both ends on
// one CPU nothing is spent on cross-CPU wake-ups, so the difference between the two figures is
// the server's own cost per message (its syscalls, scheduling and code).
//
// Usage:
//   cclient [-c CPU] [-n N] [-W WARMUP] [-s SCHEDSTAT] [-w REGION:OFFSET:SIZE:VALUE]... device SOCKET REGION OFFSET
//   cclient [-c CPU] [-n N] [-W WARMUP] echo
//
// device: connect to SOCKET, negotiate VERSION, apply the -w setup writes (REGION_WRITE, e.g.
// the PCI command register so BARs decode), then time N 4-byte REGION_READs of REGION at
// OFFSET after WARMUP untimed ones. Every reply is checked (id, command, size, echoed access);
// every value read must be the same (a register that does not change while measured).
// -s names the /proc/PID/task/TID/schedstat file of the server thread that serves the
// connection: its CPU time over the timed loop is reported per round trip.
// echo: fork a server that answers each 32-byte request with a 36-byte reply (the sizes of a
// REGION_READ of 4 bytes) over a socketpair, and time the same round trip against it.
//
// Output: one line on stdout,
//   cclient mode=device n=N min_ns=.. median_ns=.. p99_ns=.. max_ns=.. mean_ns=.. client_cpu_ns=..
//           client_vcsw_k=.. client_ivcsw_k=.. [server_cpu_ns=.. server_vcsw_k=.. server_ivcsw_k=..]
//           value=0x..
// (value only in device mode; server_cpu_ns in echo mode and with -s). The CPU times are per
// timed round trip, user and system, from schedstat: with both ends on one CPU they show where
// a round trip's time goes. The *_vcsw_k and *_ivcsw_k fields are each side's voluntary and
// involuntary context switches per 1000 timed round trips. Errors go to stderr with exit status 1.
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
	HDR = 16,
	CMD_VERSION = 1,
	CMD_REGION_READ = 9,
	CMD_REGION_WRITE = 10,
	FLAG_REPLY = 0x1,
	FLAG_TYPE_MASK = 0xf,
	FLAG_ERROR = 0x20,
	READ_REQ = HDR + 16,     // header + {offset u64, region u32, count u32}
	READ_REPLY = HDR + 16 + 4, // the same + 4 data bytes
	MAX_SETUP = 16,
};

// The capabilities a client must announce; QEMU sends more, none of which matters here.
static const char version_json[] = "{\"capabilities\":{\"max_msg_fds\":16,\"max_data_xfer_size\":1048576}}";

struct setup_write {
	uint32_t region, size;
	uint64_t offset, value;
};

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("cclient: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static void put16(uint8_t *b, uint16_t v) { memcpy(b, &v, 2); }
static void put32(uint8_t *b, uint32_t v) { memcpy(b, &v, 4); }
static void put64(uint8_t *b, uint64_t v) { memcpy(b, &v, 8); }
static uint16_t get16(const uint8_t *b) { uint16_t v; memcpy(&v, b, 2); return v; }
static uint32_t get32(const uint8_t *b) { uint32_t v; memcpy(&v, b, 4); return v; }
static uint64_t get64(const uint8_t *b) { uint64_t v; memcpy(&v, b, 8); return v; }

static void put_header(uint8_t *b, uint16_t id, uint16_t cmd, uint32_t size, uint32_t flags)
{
	put16(b, id);
	put16(b + 2, cmd);
	put32(b + 4, size);
	put32(b + 8, flags);
	put32(b + 12, 0);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// switches reads a thread's voluntary and involuntary context switches from the status file
// beside its schedstat file (same directory). Both are 0 when the file has no such lines.
static void switches(const char *schedstat, uint64_t *vol, uint64_t *invol)
{
	char path[256];
	const char *slash = strrchr(schedstat, '/');
	size_t dir = slash ? (size_t)(slash - schedstat) + 1 : 0;
	if (dir + sizeof("status") > sizeof(path))
		die("path too long: %s", schedstat);
	memcpy(path, schedstat, dir);
	strcpy(path + dir, "status");
	FILE *f = fopen(path, "r");
	if (!f)
		die("open %s: %s", path, strerror(errno));
	char line[256];
	unsigned long long v;
	*vol = *invol = 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1)
			*vol = v;
		else if (sscanf(line, "nonvoluntary_ctxt_switches: %llu", &v) == 1)
			*invol = v;
	}
	fclose(f);
}

// cpu_ns reads the CPU time (ns) a thread has run from its schedstat file.
static uint64_t cpu_ns(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		die("open %s: %s", path, strerror(errno));
	unsigned long long ns;
	if (fscanf(f, "%llu", &ns) != 1)
		die("no CPU time in %s", path);
	fclose(f);
	return ns;
}

static void send_all(int fd, const uint8_t *b, size_t n)
{
	while (n > 0) {
		ssize_t got = send(fd, b, n, MSG_NOSIGNAL);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			die("send: %s", strerror(errno));
		}
		b += got;
		n -= (size_t)got;
	}
}

// recv_exact reads exactly n bytes; 0 means the peer closed before the first byte.
static int recv_exact(int fd, uint8_t *b, size_t n)
{
	size_t have = 0;
	while (have < n) {
		ssize_t got = recv(fd, b + have, n - have, 0);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			die("recv: %s", strerror(errno));
		}
		if (got == 0) {
			if (have == 0)
				return 0;
			die("connection closed inside a message (%zu of %zu bytes)", have, n);
		}
		have += (size_t)got;
	}
	return 1;
}

// recv_message reads one whole message into b (room for cap bytes) and returns its size. It
// asks for `expect` bytes first, so a reply of the expected size costs one recv.
static uint32_t recv_message(int fd, uint8_t *b, size_t cap, size_t expect)
{
	size_t have = 0;
	if (expect < HDR)
		expect = HDR;
	while (have < HDR) {
		ssize_t got = recv(fd, b + have, expect - have, 0);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			die("recv: %s", strerror(errno));
		}
		if (got == 0)
			die("server closed the connection");
		have += (size_t)got;
	}
	uint32_t size = get32(b + 4);
	if (size < HDR || size > cap)
		die("reply of %" PRIu32 " bytes (room for %zu)", size, cap);
	if (have > size)
		die("read %zu bytes of a %" PRIu32 "-byte reply: the server sent more than asked", have, size);
	if (have < size && !recv_exact(fd, b + have, size - have))
		die("server closed the connection inside a reply");
	return size;
}

// check_reply checks the header of a reply to (id, cmd) and returns its size.
static uint32_t check_reply(const uint8_t *b, uint32_t size, uint16_t id, uint16_t cmd)
{
	uint32_t flags = get32(b + 8);
	if ((flags & FLAG_TYPE_MASK) != FLAG_REPLY)
		die("message type %" PRIu32 " where a reply was due", flags & FLAG_TYPE_MASK);
	if (get16(b) != id || get16(b + 2) != cmd)
		die("reply id %u command %u to request id %u command %u", get16(b), get16(b + 2), id, cmd);
	if (flags & FLAG_ERROR)
		die("command %u failed: errno %" PRIu32 " (%s)", cmd, get32(b + 12), strerror((int)get32(b + 12)));
	return size;
}

static int connect_unix(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		die("socket path too long: %s", path);
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect %s: %s", path, strerror(errno));
	return fd;
}

static void negotiate(int fd)
{
	uint8_t b[4096];
	uint32_t size = HDR + 4 + sizeof(version_json); // sizeof counts the NUL the JSON needs
	put_header(b, 0, CMD_VERSION, size, 0);
	put16(b + HDR, 0); // major
	put16(b + HDR + 2, 0); // minor
	memcpy(b + HDR + 4, version_json, sizeof(version_json));
	send_all(fd, b, size);
	uint32_t got = check_reply(b, recv_message(fd, b, sizeof(b), HDR), 0, CMD_VERSION);
	if (got < HDR + 4 || get16(b + HDR) != 0)
		die("VERSION reply of %" PRIu32 " bytes, major %u", got, got >= HDR + 2 ? get16(b + HDR) : 0);
}

static void region_write(int fd, uint16_t id, const struct setup_write *w)
{
	uint8_t b[HDR + 16 + 8];
	uint32_t size = HDR + 16 + w->size;
	put_header(b, id, CMD_REGION_WRITE, size, 0);
	put64(b + HDR, w->offset);
	put32(b + HDR + 8, w->region);
	put32(b + HDR + 12, w->size);
	put64(b + HDR + 16, w->value); // little-endian: the low w->size bytes go
	send_all(fd, b, size);
	check_reply(b, recv_message(fd, b, sizeof(b), HDR + 16), id, CMD_REGION_WRITE);
}

// round_trip sends one REGION_READ request (or its echo stand-in) and reads the whole reply.
// Both modes run exactly this code on the client side.
static void round_trip(int fd, uint8_t *req, uint8_t *reply, uint16_t id)
{
	put16(req, id);
	send_all(fd, req, READ_REQ);
	uint32_t size = recv_message(fd, reply, READ_REPLY, READ_REPLY);
	if (size != READ_REPLY)
		die("reply of %" PRIu32 " bytes, want %d (error %" PRIu32 ")", size, READ_REPLY, get32(reply + 12));
}

static void echo_server(int fd)
{
	uint8_t b[READ_REPLY];
	memset(b, 0, sizeof(b));
	while (recv_exact(fd, b, READ_REQ)) {
		put32(b + 4, READ_REPLY);
		put32(b + 8, FLAG_REPLY);
		send_all(fd, b, READ_REPLY);
	}
	_exit(0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		die("sched_setaffinity to CPU %d: %s", cpu, strerror(errno));
}

static long parse_num(const char *s, const char *what)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 0);
	if (errno || *s == 0 || *end != 0 || v < 0)
		die("bad %s \"%s\"", what, s);
	return (long)v;
}

static struct setup_write parse_write(const char *s)
{
	struct setup_write w;
	char tail;
	if (sscanf(s, "%" SCNu32 ":%" SCNi64 ":%" SCNu32 ":%" SCNi64 "%c", &w.region, (int64_t *)&w.offset,
		   &w.size, (int64_t *)&w.value, &tail) != 4 ||
	    (w.size != 1 && w.size != 2 && w.size != 4 && w.size != 8))
		die("bad setup write %s: want REGION:OFFSET:SIZE:VALUE with SIZE 1, 2, 4 or 8", s);
	return w;
}

static void usage(void)
{
	fputs("usage: cclient [-c CPU] [-n N] [-W WARMUP] [-s SCHEDSTAT] [-w REGION:OFFSET:SIZE:VALUE]... device SOCKET REGION OFFSET\n"
	      "       cclient [-c CPU] [-n N] [-W WARMUP] echo\n",
	      stderr);
	exit(2);
}

int main(int argc, char **argv)
{
	long n = 10000, warmup = 1000;
	int cpu = -1, nsetup = 0, opt;
	struct setup_write setup[MAX_SETUP];
	const char *server_stat = NULL;
	char child_stat[64];
	while ((opt = getopt(argc, argv, "c:n:W:s:w:")) != -1) {
		switch (opt) {
		case 's': server_stat = optarg; break;
		case 'c': cpu = (int)parse_num(optarg, "CPU"); break;
		case 'n': n = parse_num(optarg, "count"); break;
		case 'W': warmup = parse_num(optarg, "warm-up count"); break;
		case 'w':
			if (nsetup == MAX_SETUP)
				die("more than %d setup writes", MAX_SETUP);
			setup[nsetup++] = parse_write(optarg);
			break;
		default: usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 1 || n < 1)
		usage();
	int device = strcmp(argv[0], "device") == 0;
	if (device ? argc != 4 : (strcmp(argv[0], "echo") != 0 || argc != 1))
		usage();
	if (cpu >= 0)
		pin(cpu); // before the fork: the echo server inherits it

	uint8_t req[READ_REQ], reply[READ_REPLY];
	uint32_t region = 0;
	uint64_t offset = 0;
	int fd;
	pid_t child = -1;
	if (device) {
		region = (uint32_t)parse_num(argv[2], "region");
		offset = (uint64_t)parse_num(argv[3], "offset");
		fd = connect_unix(argv[1]);
		negotiate(fd);
		for (int i = 0; i < nsetup; i++)
			region_write(fd, (uint16_t)(i + 1), &setup[i]);
	} else {
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
			die("socketpair: %s", strerror(errno));
		child = fork();
		if (child < 0)
			die("fork: %s", strerror(errno));
		if (child == 0) {
			close(sv[0]);
			echo_server(sv[1]);
		}
		close(sv[1]);
		fd = sv[0];
		snprintf(child_stat, sizeof(child_stat), "/proc/%d/schedstat", (int)child);
		server_stat = child_stat;
	}
	put_header(req, 0, CMD_REGION_READ, READ_REQ, 0);
	put64(req + HDR, offset);
	put32(req + HDR + 8, region);
	put32(req + HDR + 12, 4);

	uint64_t *ns = calloc((size_t)n, sizeof(uint64_t));
	if (!ns)
		die("out of memory for %ld samples", n);
	uint32_t value = 0;
	uint16_t id = 0x100;
	uint64_t client0 = 0, server0 = 0;
	uint64_t cvol0 = 0, cinvol0 = 0, svol0 = 0, sinvol0 = 0;
	for (long i = -warmup; i < n; i++) {
		id++;
		if (i == 0) {
			client0 = cpu_ns("/proc/self/schedstat");
			switches("/proc/self/schedstat", &cvol0, &cinvol0);
			if (server_stat) {
				server0 = cpu_ns(server_stat);
				switches(server_stat, &svol0, &sinvol0);
			}
		}
		uint64_t t0 = now_ns();
		round_trip(fd, req, reply, id);
		uint64_t t1 = now_ns();
		if (i >= 0)
			ns[i] = t1 - t0;
		if (!device)
			continue;
		check_reply(reply, READ_REPLY, id, CMD_REGION_READ);
		if (get64(reply + HDR) != offset || get32(reply + HDR + 8) != region || get32(reply + HDR + 12) != 4)
			die("reply does not echo the access (offset %#" PRIx64 " region %" PRIu32 " count %" PRIu32 ")",
			    get64(reply + HDR), get32(reply + HDR + 8), get32(reply + HDR + 12));
		uint32_t v = get32(reply + HDR + 16);
		if (i == -warmup)
			value = v;
		else if (v != value)
			die("register changed while measured: %#" PRIx32 " then %#" PRIx32, value, v);
	}
	// The server is blocked in recv now, so its figure is up to date; ours is brought up to
	// date by the read itself.
	uint64_t client_cpu = (cpu_ns("/proc/self/schedstat") - client0) / (uint64_t)n;
	uint64_t server_cpu = server_stat ? (cpu_ns(server_stat) - server0) / (uint64_t)n : 0;
	uint64_t cvol, cinvol, svol = 0, sinvol = 0;
	switches("/proc/self/schedstat", &cvol, &cinvol);
	if (server_stat)
		switches(server_stat, &svol, &sinvol);
	close(fd);
	if (child > 0) {
		int st;
		if (waitpid(child, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			die("echo server did not exit cleanly");
	}

	uint64_t sum = 0;
	for (long i = 0; i < n; i++)
		sum += ns[i];
	qsort(ns, (size_t)n, sizeof(uint64_t), cmp_u64);
	long p99 = (n * 99 + 99) / 100 - 1; // nearest rank
	printf("cclient mode=%s n=%ld min_ns=%" PRIu64 " median_ns=%" PRIu64 " p99_ns=%" PRIu64 " max_ns=%" PRIu64
	       " mean_ns=%" PRIu64,
	       device ? "device" : "echo", n, ns[0], ns[n / 2], ns[p99], ns[n - 1], sum / (uint64_t)n);
	printf(" client_cpu_ns=%" PRIu64, client_cpu);
	// Context switches over the timed loop, per 1000 round trips: one voluntary switch per
	// side and round trip is the pattern of two processes taking turns; more means a side
	// woke without its message and slept again, involuntary ones that it was preempted.
	printf(" client_vcsw_k=%" PRIu64 " client_ivcsw_k=%" PRIu64, (cvol - cvol0) * 1000 / (uint64_t)n,
	       (cinvol - cinvol0) * 1000 / (uint64_t)n);
	if (server_stat)
		printf(" server_cpu_ns=%" PRIu64 " server_vcsw_k=%" PRIu64 " server_ivcsw_k=%" PRIu64, server_cpu,
		       (svol - svol0) * 1000 / (uint64_t)n, (sinvol - sinvol0) * 1000 / (uint64_t)n);
	if (device)
		printf(" value=%#" PRIx32, value);
	printf("\n");
	free(ns);
	return 0;
}
