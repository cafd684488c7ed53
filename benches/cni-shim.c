/* A timing shim for benches/cri.sh and benches/podman.sh: installed as BIN/<name> where the
 * client looks for a CNI plugin (containerd's bin_dir, podman's cni_plugin_dirs) or for netavark
 * (podman's helper_binaries_dir), it runs BIN/../real/<name> (same argv, environment,
 * stdin/stdout/stderr), waits for it and appends "COMMAND CONTAINERID NS NAME CPU_NS" to BIN/../cni-times.log
 * (one write, O_APPEND: concurrent shims do not interleave lines), then exits with the real
 * program's status, then the CPU time (user + system, ns) of the real program and of the programs it
 * waited for (wait4's rusage). COMMAND is CNI_COMMAND for a plugin, the verb (the argument before the last:
 * `netavark [OPTIONS] setup NETNS`) for netavark. Its own exec costs the same on every side and is
 * outside the logged time. A plugin that a plugin runs (the reference bridge execs host-local
 * through CNI_PATH, which holds the shims) is inside its caller's time: the shim marks its child's
 * environment and a shim that finds the mark execs the real plugin without timing it, so no call
 * is counted twice. When BIN/../cgroup names a cgroup directory, the shim moves itself into it
 * before it starts the plugin, so that cgroup's CPU time is the plugins' with everything they
 * start, also what outlives them. */
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
    char a[PATH_MAX], b[PATH_MAX], real[PATH_MAX], log[PATH_MAX], cg[PATH_MAX], line[256];
    struct timespec t0, t1;
    pid_t pid;
    int st = 0, fd;
    const char *c = getenv("CNI_COMMAND"), *id = getenv("CNI_CONTAINERID");
    snprintf(a, sizeof a, "%s", argv[0]);
    snprintf(b, sizeof b, "%s", argv[0]);
    snprintf(real, sizeof real, "%s/../real/%s", dirname(a), basename(b));
    snprintf(b, sizeof b, "%s", argv[0]);
    snprintf(log, sizeof log, "%s/../cni-times.log", dirname(b));
    if (getenv("CNIBOX_SHIM_NESTED")) {
        execv(real, argv);
        return 127;
    }
    setenv("CNIBOX_SHIM_NESTED", "1", 1);
    /* BIN/../cgroup, when there, names a cgroup directory: the real plugin and everything it
     * starts (also what it leaves running when it returns) are accounted there. */
    snprintf(b, sizeof b, "%s", argv[0]);
    snprintf(cg, sizeof cg, "%s/../cgroup", dirname(b));
    if ((fd = open(cg, O_RDONLY)) >= 0) {
        ssize_t n = read(fd, cg, sizeof cg - 32);
        close(fd);
        while (n > 0 && (cg[n - 1] == '\n' || cg[n - 1] == ' '))
            n--;
        if (n > 0) {
            cg[n] = 0;
            strcat(cg, "/cgroup.procs");
            if ((fd = open(cg, O_WRONLY)) >= 0) {
                if (write(fd, "0\n", 2) < 0) { /* accounted with its caller instead */ }
                close(fd);
            }
        }
    }
    if (!c)
        c = argc > 2 ? argv[argc - 2] : argc > 1 ? argv[1] : "-";
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (posix_spawn(&pid, real, NULL, NULL, argv, environ) != 0)
        return 127;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &st, 0, &ru) < 0)
        ;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fd = open(log, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0) {
        long long cpu = (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
                        (long long)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
        int n = snprintf(line, sizeof line, "%s %s %lld %s %lld\n", c, id && *id ? id : "-",
                         (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec),
                         basename(real), cpu);
        if (write(fd, line, (size_t)n) < 0) { /* the sample just lacks this call */ }
        close(fd);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
