package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// BinDirEnv names the environment variable that points the suite at another control plane: a
// directory holding kube-apiserver, kube-scheduler and kube-controller-manager of another
// Kubernetes release (and etcd), as `make control-plane-versions` builds into bin/k8s-1.NN. Unset,
// the control plane is the pinned one in <repo root>/bin.
const BinDirEnv = "LOCKSTEP_KUBE_BIN"

// Release is the Kubernetes release a control plane's binaries are built from.
type Release struct {
	Minor int
	// Version is the whole version, e.g. "v1.37.2".
	Version string
}

func (r Release) String() string { return r.Version }

// AtLeast reports whether the release is 1.minor or newer.
func (r Release) AtLeast(minor int) bool { return r.Minor >= minor }

var releaseLine = regexp.MustCompile(`Kubernetes (v1\.(\d+)\.\d+\S*)`)

// ReleaseOf asks the kube-apiserver in binDir which release it is. The build script stamps the
// pinned version into it (hack/build-control-plane.sh); a plain go build would say v0.0.0.
func ReleaseOf(binDir string) (Release, error) {
	bin := filepath.Join(binDir, KubeAPIServer)
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return Release{}, fmt.Errorf("cluster: %s --version: %w", bin, err)
	}
	return parseRelease(string(out))
}

func parseRelease(s string) (Release, error) {
	m := releaseLine.FindStringSubmatch(s)
	if m == nil {
		return Release{}, fmt.Errorf("cluster: %q names no Kubernetes v1.N release: rebuild the control plane with `make control-plane`", strings.TrimSpace(s))
	}
	minor, err := strconv.Atoi(m[2])
	if err != nil {
		return Release{}, fmt.Errorf("cluster: minor of %q: %w", m[1], err)
	}
	return Release{Minor: minor, Version: m[1]}, nil
}

// DefaultBinDir is where Start finds the control plane when Options.BinDir is empty: BinDirEnv if
// set (relative to the repo root unless absolute), else <repo root>/bin.
func DefaultBinDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("cluster: finding the binaries: %w", err)
	}
	dir := os.Getenv(BinDirEnv)
	switch {
	case dir == "":
		return filepath.Join(root, "bin"), nil
	case filepath.IsAbs(dir):
		return dir, nil
	default:
		return filepath.Join(root, dir), nil
	}
}
