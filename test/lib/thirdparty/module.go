// Package thirdparty fetches other projects' published files (their CRDs above all) from the Go
// module proxy at exact versions, and installs those CRDs into a test cluster, so the end-to-end
// suite can run lockstep against the gang "dialects" of Volcano, scheduler-plugins, kube-batch,
// Koordinator and the Kubeflow training-operator without the repository carrying copies of
// their files. The files are read as published; the few changes today's kube-apiserver needs
// (see InstallCRDs) are made in memory at install time.
package thirdparty

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// moduleInfo is the part of `go mod download -json` output ModuleDir reads.
type moduleInfo struct {
	Path    string
	Version string
	Dir     string
	Error   string
}

// ModuleDir downloads module@version through the Go module proxy (or finds it in the module
// cache) and returns the directory it is unpacked in. The directory is read-only. version must
// be exact: the proxy this suite runs against refuses version lists, so queries such as "latest"
// fail.
func ModuleDir(ctx context.Context, module, version string) (string, error) {
	if module == "" || version == "" {
		return "", errors.New("thirdparty: ModuleDir needs a module path and an exact version")
	}
	what := module + "@" + version
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", what)
	// Outside any module, so the repository's go.mod and go.sum are neither read nor touched.
	cmd.Dir = os.TempDir()
	cmd.Env = downloadEnv(os.Environ())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	// go reports a failed download in the JSON's Error field (and exits 1); other failures
	// (no go on PATH, a bad GOFLAGS) show only on stderr.
	var info moduleInfo
	if err := json.Unmarshal(stdout.Bytes(), &info); err != nil && runErr == nil {
		return "", fmt.Errorf("thirdparty: go mod download %s: reading its output: %w\n%s", what, err, stdout.String())
	}
	if runErr != nil || info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("thirdparty: go mod download %s failed (%v): %s", what, runErr,
			strings.TrimSpace(info.Error+"\n"+stderr.String()))
	}
	return info.Dir, nil
}

// downloadEnv adapts the caller's environment for a download outside any module: workspaces
// off, module mode on, and -mod=mod so a GOFLAGS=-mod=vendor or readonly set for the repository
// does not stop the download. Checksums are still verified against the checksum database; a CI
// machine starts with an empty module cache and gets everything from the proxy.
func downloadEnv(env []string) []string {
	goflags := ""
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "GOFLAGS="):
			goflags = withoutModFlag(strings.TrimPrefix(kv, "GOFLAGS="))
		case strings.HasPrefix(kv, "GOWORK="), strings.HasPrefix(kv, "GO111MODULE="):
		default:
			out = append(out, kv)
		}
	}
	return append(out, "GOWORK=off", "GO111MODULE=on", "GOFLAGS="+strings.TrimSpace(goflags+" -mod=mod"))
}

// withoutModFlag drops any -mod=... from a GOFLAGS value.
func withoutModFlag(goflags string) string {
	var keep []string
	for _, f := range strings.Fields(goflags) {
		if !strings.HasPrefix(f, "-mod=") && !strings.HasPrefix(f, "--mod=") {
			keep = append(keep, f)
		}
	}
	return strings.Join(keep, " ")
}
