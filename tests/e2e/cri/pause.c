/* The sandbox ("pause") process of the containerd end-to-end test's locally built image: it
 * holds the pod's namespaces and exits on SIGINT/SIGTERM, as Kubernetes' pause does. */
#include <signal.h>
#include <unistd.h>

static void bye(int sig) {
    (void)sig;
    _exit(0);
}

int main(void) {
    signal(SIGINT, bye);
    signal(SIGTERM, bye);
    for (;;)
        pause();
}
