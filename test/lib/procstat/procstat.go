// Package procstat reads what a process costs, from Linux's /proc and from Go's CPU profiler, for
// the benchmarks that run lockstep and the control plane as processes of their own
// (test/cmd/verbbench, test/cmd/throughput).
package procstat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TicksPerSecond is USER_HZ, the unit of the CPU times in /proc/PID/stat: 100 on every Linux
// architecture Go supports.
const TicksPerSecond = 100

// CPUTicks sums the user and system CPU time of processes, in clock ticks. A process that is gone
// counts 0.
func CPUTicks(pids ...int) int64 {
	var total int64
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The command name, in parentheses, may hold spaces; the fields after it are fixed.
		fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(fields) > 12 {
			utime, _ := strconv.ParseInt(fields[11], 10, 64)
			stime, _ := strconv.ParseInt(fields[12], 10, 64)
			total += utime + stime
		}
	}
	return total
}

// ResidentMB is a process's resident memory now (VmRSS), in MiB; -1 if it cannot be read.
func ResidentMB(pid int) float64 { return statusMB(pid, "VmRSS:") }

// PeakResidentMB is the most resident memory a process has had (VmHWM), in MiB; -1 if it cannot
// be read.
func PeakResidentMB(pid int) float64 { return statusMB(pid, "VmHWM:") }

func statusMB(pid int, field string) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, field) {
			kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			return kb / 1024
		}
	}
	return -1
}

// WaitUntilQuiet waits, up to timeout, until processes together use under a tenth of a core over
// a second, and says whether they did. After a bulk load kube-apiserver spends a while digesting
// it; on a two-core machine that competes with whatever is measured next.
func WaitUntilQuiet(ctx context.Context, timeout time.Duration, pids ...int) bool {
	const window, idleTicks = time.Second, TicksPerSecond / 10
	last := CPUTicks(pids...)
	err := wait.PollUntilContextTimeout(ctx, window, timeout, false, func(context.Context) (bool, error) {
		now := CPUTicks(pids...)
		used := now - last
		last = now
		return used < idleTicks, nil
	})
	return err == nil
}

// CPUProfile fetches a CPU profile over seconds from a Go process serving net/http/pprof under
// baseURL/debug/pprof/, and writes it to file.
func CPUProfile(ctx context.Context, client *http.Client, baseURL string, seconds int, file string) error {
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", baseURL, seconds)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	_, err = out.ReadFrom(resp.Body)
	return errors.Join(err, out.Close())
}
