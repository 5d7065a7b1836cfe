package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
)

// checkBinary fails, saying which make target builds it, when BinDir has no executable binary.
func checkBinary(binDir, binary, makeTarget string) error {
	st, err := os.Stat(filepath.Join(binDir, binary))
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("harness: %s not found in %s: run `make %s`", binary, binDir, makeTarget)
	}
	return nil
}

// ensureNamespace creates the namespace unless it exists. It is never deleted: with no namespace
// controller running, a deleted namespace never goes away.
func ensureNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("harness: namespace %s: %w", name, err)
	}
	return nil
}

// logOffset is the size of a component's log before it starts again: a component's log is
// appended to, so this is where the new run's output begins.
func logOffset(path string) int64 {
	if st, err := os.Stat(path); err == nil {
		return st.Size()
	}
	return 0
}

// logSince returns a component's log from offset from.
func logSince(path string, from int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// hasLine says whether some line of text holds both a and b.
func hasLine(text []byte, a, b string) bool {
	for line := range bytes.Lines(text) {
		if bytes.Contains(line, []byte(a)) && bytes.Contains(line, []byte(b)) {
			return true
		}
	}
	return false
}

// readyLine is how a component says in its log that it is ready.
type readyLine struct {
	name, logPath, line string
	// hint is what to check when the line never comes.
	hint    string
	timeout time.Duration
}

// waitForLine waits for proc's log, from offset from, to hold r.line. A process that exits, or a
// line that does not come within r.timeout, is an error carrying the log's last lines.
func waitForLine(ctx context.Context, proc *cluster.Component, r readyLine, from int64) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, r.timeout, true, func(context.Context) (bool, error) {
		if proc.Exited() {
			return false, fmt.Errorf("exited (%v)", proc.ExitErr())
		}
		out, err := logSince(r.logPath, from)
		return err == nil && bytes.Contains(out, []byte(r.line)), nil
	})
	if err == nil {
		return nil
	}
	if wait.Interrupted(err) && ctx.Err() == nil {
		err = fmt.Errorf("not ready within %s (no %q in its log: %s)", r.timeout, r.line, r.hint)
	}
	return fmt.Errorf("harness: %s %v\n--- last 30 lines of %s ---\n%s", r.name, err, r.logPath, proc.Tail(30))
}
