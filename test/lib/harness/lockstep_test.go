package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A repository of its own, so that the test adds no worktree to the project's.
func tempRepo(t *testing.T) (dir string, git func(args ...string) string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir = t.TempDir()
	git = func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=bench", "-c", "user.email=bench@example.com"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	return dir, git
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// The baseline is built from the commit, whatever the working tree holds, and its worktree is
// gone afterwards.
func TestBuildExtenderAtBuildsTheCommitNotTheWorkingTree(t *testing.T) {
	repo, git := tempRepo(t)
	t.Setenv("GOWORK", "off")
	source := filepath.Join(repo, "cmd", "extender", "main.go")
	writeFile(t, filepath.Join(repo, "go.mod"), "module example.com/extender\n\ngo 1.21\n")
	writeFile(t, source, "package main\n\nfunc main() { println(\"committed\") }\n")
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "extender")
	writeFile(t, source, "package main\n\nthis does not compile\n")

	bin, err := BuildExtenderAt(repo, t.TempDir(), "HEAD")
	require.NoError(t, err)
	out, err := exec.Command(bin).CombinedOutput()
	require.NoError(t, err)
	assert.Equal(t, "committed\n", string(out))
	assert.Equal(t, 1, strings.Count(git("worktree", "list", "--porcelain"), "worktree "), "the build's worktree is removed")

	short, err := ShortRevision(repo, "HEAD")
	require.NoError(t, err)
	assert.Equal(t, git("rev-parse", "--short", "HEAD"), short)
	_, err = ShortRevision(repo, "HEAD~1")
	assert.ErrorContains(t, err, "git rev-parse", "a revision the repository does not have")
	_, err = BuildExtenderAt(repo, t.TempDir(), "HEAD~1")
	assert.ErrorContains(t, err, "git worktree add")
}
