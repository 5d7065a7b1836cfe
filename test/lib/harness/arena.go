package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/thirdparty"
)

// Arena's command line and what it needs on the machine, built by `make arena`
// (hack/build-arena.sh) from test/tools/arena and test/tools/k8s.
const (
	// ArenaBinary is Arena v0.15.5's command line in the cluster's BinDir.
	ArenaBinary = "arena"
	// ArenaKubectlBinary is the kubectl Arena shells out to: it runs exactly this name from PATH
	// (pkg/util/kubectl) to dry-run, create and delete what its charts render.
	ArenaKubectlBinary = "arena-kubectl"
	// ArenaModule and ArenaVersion are where Arena's charts come from: the same module the
	// binary is built from. Arena renders them (with Helm built in) from $HOME/charts, else
	// /charts (pkg/util.GetChartsFolder).
	ArenaModule  = "github.com/kubeflow/arena"
	ArenaVersion = "v0.15.5"
	// ArenaTimeout bounds one Arena command.
	ArenaTimeout = 2 * time.Minute
)

// Arena runs bin/arena as a user would: from a home of its own that holds Arena's charts, with
// arena-kubectl on PATH and a kubeconfig whose user authenticates with a token (Arena works out
// who the user is from a client certificate or a token, and refuses otherwise).
type Arena struct {
	// Home is Arena's $HOME: charts (a link to the module's charts/), .kube/ (kubectl's cache)
	// and tmp/ (Arena's and Helm's temporary files), in the cluster's WorkDir.
	Home string
	// Kubeconfig is the kubeconfig Arena and arena-kubectl use (KUBECONFIG).
	Kubeconfig string

	bin string
	env []string
}

// NewArena prepares a home for Arena against the cluster, acting as the cluster's admin through
// its static token. It installs the training-operator's CRDs (thirdparty.TrainingOperatorCRDs):
// Arena looks a job kind's CRD up before it submits one (its trainers are disabled, and the
// existence check fails, without it). Namespaces Arena is told to submit to must exist (it reads
// the namespace's labels at start). What Arena can do without: ~/.arena/config (its defaults),
// the ConfigMap arena-system/arena-config (its admin users), any Arena component in the cluster.
func NewArena(ctx context.Context, c *cluster.Cluster) (*Arena, error) {
	for _, b := range []string{ArenaBinary, ArenaKubectlBinary} {
		if err := checkBinary(c.BinDir, b, "arena"); err != nil {
			return nil, err
		}
	}
	mod, err := thirdparty.ModuleDir(ctx, ArenaModule, ArenaVersion)
	if err != nil {
		return nil, err
	}
	charts := filepath.Join(mod, "charts")
	if _, err := os.Stat(filepath.Join(charts, "pytorchjob", "Chart.yaml")); err != nil {
		return nil, fmt.Errorf("harness: %s@%s has no charts/pytorchjob: %w", ArenaModule, ArenaVersion, err)
	}
	crds, err := thirdparty.TrainingOperatorCRDs(ctx)
	if err != nil {
		return nil, err
	}
	if err := thirdparty.InstallCRDs(ctx, c.RESTConfig, crds...); err != nil {
		return nil, err
	}
	home, err := os.MkdirTemp(c.WorkDir, "arena-home-")
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	// PATH: a folder with arena-kubectl alone first, then the caller's (Arena runs `bash -c`
	// to delete what it created).
	path := filepath.Join(home, "bin")
	tmp := filepath.Join(home, "tmp")
	for _, d := range []string{path, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("harness: %w", err)
		}
	}
	if err := os.Symlink(filepath.Join(c.BinDir, ArenaKubectlBinary), filepath.Join(path, ArenaKubectlBinary)); err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	if err := os.Symlink(charts, filepath.Join(home, "charts")); err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	// A file of its own: KubeconfigForToken names the file after its first argument.
	kubeconfig, err := c.KubeconfigForToken("arena-"+strings.TrimPrefix(filepath.Base(home), "arena-home-"), c.Token("admin"))
	if err != nil {
		return nil, err
	}
	env := []string{
		"HOME=" + home,
		"PATH=" + path + string(os.PathListSeparator) + os.Getenv("PATH"),
		"KUBECONFIG=" + kubeconfig,
		"TMPDIR=" + tmp,
	}
	// Nothing of the caller's own Kubernetes, Helm or Arena setup reaches Arena.
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME", k == "PATH", k == "KUBECONFIG", k == "TMPDIR",
			strings.HasPrefix(k, "HELM_"), strings.HasPrefix(k, "ARENA_"), strings.HasPrefix(k, "XDG_"):
		default:
			env = append(env, kv)
		}
	}
	return &Arena{Home: home, Kubeconfig: kubeconfig, bin: filepath.Join(c.BinDir, ArenaBinary), env: env}, nil
}

// Run runs `arena args...` and returns what it printed (stdout and stderr together, as a
// terminal shows them). An Arena that fails, or does not finish within ArenaTimeout, is an error
// that carries the command and its output.
func (a *Arena) Run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, ArenaTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, a.bin, args...)
	cmd.Env = a.env
	cmd.Dir = a.Home
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err == nil {
		return out.String(), nil
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("not done within %s", ArenaTimeout)
	}
	return out.String(), fmt.Errorf("harness: arena %s: %w\n--- arena's output ---\n%s", ShellQuote(args), err, out.String())
}

// ShellQuote renders a command line for messages and logs, quoting the arguments a shell would
// split or expand.
func ShellQuote(args []string) string {
	q := make([]string, len(args))
	for i, s := range args {
		if s == "" || strings.ContainsAny(s, " \t\n\"'$\\|&;<>()*?[]{}~`#") {
			s = "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
		q[i] = s
	}
	return strings.Join(q, " ")
}
