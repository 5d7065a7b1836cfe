package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/testcerts"
	"github.com/lockstep-sched/lockstep/test/lib/thirdparty"
)

// KueueBinary is Kueue's controller file name in the cluster's BinDir, built by `make kueue`
// (hack/build-kueue.sh).
const KueueBinary = "kueue"

const (
	// KueueNamespaceLabel marks the namespaces Kueue manages pods in: its
	// managedJobsNamespaceSelector and the namespace selector of the pod webhooks registered for
	// it both select this label (value "true"). Every other namespace's pods stay untouched, even
	// those that carry Kueue's labels (other tests write them without running Kueue).
	KueueNamespaceLabel = "kueue.lockstep.e2e/managed"
	// KueueMetricsCertDir is where Kueue v0.17.1 reads its metrics certificate whenever its
	// internal certificate management is off, metrics server or not (cmd/kueue/main.go).
	KueueMetricsCertDir = "/etc/kueue/metrics/certs"
	// KueueReadyTimeout bounds StartKueue's wait for the controllers and the webhook server.
	KueueReadyTimeout = 2 * time.Minute
	// KueueWebhookTimeout bounds WaitManaged's wait for the pod webhook to act in a namespace.
	KueueWebhookTimeout = time.Minute

	// kueueNamespace is Kueue's own namespace (its Configuration's namespace, where it reads
	// MultiKueue's Secrets), created as a real install has it.
	kueueNamespace = "kueue-system"
	// kueueWebhooks names both webhook configurations StartKueue registers.
	kueueWebhooks = "lockstep-e2e-kueue"
	// kueueAdmissionGate is the scheduling gate Kueue's pod webhook puts on a pod it manages and
	// removes when it admits the pod's workload.
	kueueAdmissionGate = "kueue.x-k8s.io/admission"
)

// kueueControllers are the controllers (by their loggers' names) whose "Starting workers" line
// StartKueue waits for: the queues and Workloads, and the two integrations the suite uses (plain
// pods, batch Jobs).
var kueueControllers = []string{"clusterqueue-reconciler", "localqueue-reconciler", "resourceflavor-reconciler",
	"workload-reconciler", "v1_pod", "job"}

// Kueue is a running Kueue controller (quota admission), with its pod webhooks registered for
// namespaces labelled KueueNamespaceLabel=true.
type Kueue struct {
	// LogPath is its output, in the cluster's WorkDir; each start appends to it.
	LogPath string

	client   kubernetes.Interface
	proc     *cluster.Component
	logf     func(format string, args ...any)
	stopOnce sync.Once
}

// StartKueue installs Kueue's CRDs, runs bin/kueue against the cluster out of cluster (leader
// election, internal certificate management, metrics and the visibility server off; the pod and
// batch/job integrations on), registers its pod webhooks by URL on loopback, and returns once its
// controllers run and its webhook server serves. Call Stop when done; only one may run at a time
// (they would share webhook configurations and admit the same workloads).
func StartKueue(ctx context.Context, c *cluster.Cluster, logf func(format string, args ...any)) (_ *Kueue, err error) {
	began := time.Now()
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := checkBinary(c.BinDir, KueueBinary, "kueue"); err != nil {
		return nil, err
	}
	setup, err := prepareKueue(ctx, c)
	if err != nil {
		return nil, err
	}
	k := &Kueue{client: c.Client, logf: logf}
	defer func() {
		if err != nil {
			k.Stop()
		}
	}()
	from, err := k.launch(c, setup)
	if err != nil {
		return nil, err
	}
	if err := k.waitReady(ctx, from); err != nil {
		return nil, err
	}
	if err := registerKueueWebhooks(ctx, c.Client, setup.webhookPort, setup.ca.CertPEM); err != nil {
		return nil, err
	}
	logf("kueue ready in %s (webhook https://127.0.0.1:%d)", time.Since(began).Round(time.Millisecond), setup.webhookPort)
	return k, nil
}

// kueueSetup is what prepareKueue made for a run.
type kueueSetup struct {
	ca          *testcerts.CA // signs the webhook's certificate
	config      string        // the Configuration file
	webhookPort int
}

// prepareKueue installs the CRDs and the namespace Kueue needs and writes its certificates and
// its Configuration into the cluster's WorkDir.
func prepareKueue(ctx context.Context, c *cluster.Cluster) (kueueSetup, error) {
	paths, err := thirdparty.KueueCRDs(ctx)
	if err != nil {
		return kueueSetup{}, err
	}
	if err := thirdparty.InstallCRDs(ctx, c.RESTConfig, paths...); err != nil {
		return kueueSetup{}, err
	}
	if err := ensureNamespace(ctx, c.Client, kueueNamespace); err != nil {
		return kueueSetup{}, err
	}
	ca, err := testcerts.NewCA("lockstep-e2e-kueue-ca")
	if err != nil {
		return kueueSetup{}, fmt.Errorf("harness: kueue CA: %w", err)
	}
	certDir, err := writeKueueCerts(c.WorkDir, ca)
	if err != nil {
		return kueueSetup{}, err
	}
	port, err := cluster.FreePort()
	if err != nil {
		return kueueSetup{}, err
	}
	config, err := writeKueueConfig(c.WorkDir, port, certDir)
	if err != nil {
		return kueueSetup{}, err
	}
	return kueueSetup{ca: ca, config: config, webhookPort: port}, nil
}

// launch starts the process. from is the size Kueue's log had before, where this run's output
// begins. Kueue parses kube-apiserver's /version at start and exits on a version that is not
// semantic: hack/build-control-plane.sh stamps the pinned release into the binaries for it.
func (k *Kueue) launch(c *cluster.Cluster, setup kueueSetup) (from int64, err error) {
	from = logOffset(filepath.Join(c.WorkDir, KueueBinary+".log"))
	k.proc, err = c.StartComponent(KueueBinary, KueueBinary,
		"--config", setup.config,
		"--kubeconfig", c.AdminKubeconfig,
		// On by default, it would serve Kueue's visibility API on :8082 of every interface.
		"--feature-gates=VisibilityOnDemand=false",
	)
	if err != nil {
		return 0, err
	}
	k.LogPath = k.proc.LogPath()
	return from, nil
}

// writeKueueCerts puts the webhook server's certificate for 127.0.0.1 in a folder of WorkDir
// and returns the folder. It also makes sure KueueMetricsCertDir holds a certificate: Kueue
// loads it at start even with its metrics server off (and exits when it cannot), and the path is
// fixed in its code. Files already there are kept, since another Kueue may be reading them; the
// certificate is never served, so any valid pair will do.
func writeKueueCerts(workDir string, ca *testcerts.CA) (string, error) {
	pair, err := ca.Server("kueue-webhook")
	if err != nil {
		return "", fmt.Errorf("harness: kueue webhook certificate: %w", err)
	}
	dir := filepath.Join(workDir, "kueue-webhook-certs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("harness: %w", err)
	}
	if _, _, err := pair.Write(dir, "tls"); err != nil {
		return "", fmt.Errorf("harness: writing kueue webhook certificate: %w", err)
	}
	if err := ensureKueueMetricsCert(pair); err != nil {
		return "", err
	}
	return dir, nil
}

// ensureKueueMetricsCert writes pair to KueueMetricsCertDir unless a pair is there already.
func ensureKueueMetricsCert(pair testcerts.Pair) error {
	crt, key := filepath.Join(KueueMetricsCertDir, "tls.crt"), filepath.Join(KueueMetricsCertDir, "tls.key")
	if fileExists(crt) && fileExists(key) {
		return nil
	}
	if err := os.MkdirAll(KueueMetricsCertDir, 0o755); err != nil {
		return fmt.Errorf("harness: Kueue insists on a metrics certificate in %s: %w", KueueMetricsCertDir, err)
	}
	if _, _, err := pair.Write(KueueMetricsCertDir, "tls"); err != nil {
		return fmt.Errorf("harness: Kueue insists on a metrics certificate in %s: %w", KueueMetricsCertDir, err)
	}
	return nil
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// kueueConfig is Kueue's Configuration (config.kueue.x-k8s.io/v1beta2) for a run on loopback
// beside the suite's control plane. %d is the webhook port, %q the certificate folder and the
// namespace label.
const kueueConfig = `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: ` + kueueNamespace + `
leaderElection:
  leaderElect: false
# The certificates are the harness's; Kueue's rotator would write them to a Secret for a
# Service that does not exist here.
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %q
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: "0"
manageJobsWithoutQueueName: false
managedJobsNamespaceSelector:
  matchLabels:
    %q: "true"
integrations:
  frameworks:
  - batch/job
  - pod
`

// writeKueueConfig writes the Configuration into WorkDir and returns its path.
func writeKueueConfig(workDir string, webhookPort int, certDir string) (string, error) {
	path := filepath.Join(workDir, "kueue-config.yaml")
	body := fmt.Sprintf(kueueConfig, webhookPort, certDir, KueueNamespaceLabel)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return "", fmt.Errorf("harness: writing kueue configuration: %w", err)
	}
	return path, nil
}

// waitReady waits for this run's log (from offset from) to show every controller of
// kueueControllers started and the webhook server serving.
func (k *Kueue) waitReady(ctx context.Context, from int64) error {
	last := "no log yet"
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, KueueReadyTimeout, true, func(context.Context) (bool, error) {
		if k.proc.Exited() {
			return false, fmt.Errorf("exited (%v)", k.proc.ExitErr())
		}
		out, err := logSince(k.LogPath, from)
		if err != nil {
			return false, nil
		}
		if !bytes.Contains(out, []byte("Serving webhook server")) {
			last = "webhook server not serving yet"
			return false, nil
		}
		for _, name := range kueueControllers {
			if !hasLine(out, "Starting workers", `"logger":"`+name+`"`) {
				last = "controller " + name + " not started yet"
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		if wait.Interrupted(err) && ctx.Err() == nil {
			err = fmt.Errorf("not ready within %s", KueueReadyTimeout)
		}
		return fmt.Errorf("harness: kueue %v (%s)\n--- last 30 lines of %s ---\n%s", err, last, k.LogPath, k.proc.Tail(30))
	}
	return nil
}

// registerKueueWebhooks registers Kueue's pod webhooks (mpod.kb.io and vpod.kb.io in its
// config/components/webhook/manifests.yaml) by URL, for the namespaces labelled
// KueueNamespaceLabel only. Jobs need no webhook: they are created suspended and Kueue's Job
// controller resumes them on admission. failurePolicy Fail, as Kueue ships it: a pod its webhook
// did not see would run without admission.
func registerKueueWebhooks(ctx context.Context, cs kubernetes.Interface, port int, caPEM []byte) error {
	if err := deleteKueueWebhooks(ctx, cs); err != nil {
		return err
	}
	mutate, validate := kueueWebhookURL(port, "/mutate--v1-pod"), kueueWebhookURL(port, "/validate--v1-pod")
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{KueueNamespaceLabel: "true"}}
	rule := func(ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{
			APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}
	}
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: kueueWebhooks},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "mpod.kb.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &mutate, CABundle: caPEM},
			Rules:                   rule(admissionregistrationv1.Create),
			NamespaceSelector:       selector,
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: kueueWebhooks},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "vpod.kb.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &validate, CABundle: caPEM},
			Rules:                   rule(admissionregistrationv1.Create, admissionregistrationv1.Update),
			NamespaceSelector:       selector,
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	adm := cs.AdmissionregistrationV1()
	if _, err := adm.MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("harness: mutating webhook configuration %s: %w", kueueWebhooks, err)
	}
	if _, err := adm.ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("harness: validating webhook configuration %s: %w", kueueWebhooks, err)
	}
	return nil
}

func kueueWebhookURL(port int, path string) string {
	return "https://127.0.0.1:" + strconv.Itoa(port) + path
}

// deleteKueueWebhooks deletes both webhook configurations, if there.
func deleteKueueWebhooks(ctx context.Context, cs kubernetes.Interface) error {
	adm := cs.AdmissionregistrationV1()
	err := adm.MutatingWebhookConfigurations().Delete(ctx, kueueWebhooks, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("harness: deleting mutating webhook configuration %s: %w", kueueWebhooks, err)
	}
	err = adm.ValidatingWebhookConfigurations().Delete(ctx, kueueWebhooks, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("harness: deleting validating webhook configuration %s: %w", kueueWebhooks, err)
	}
	return nil
}

// WaitManaged labels the namespace KueueNamespaceLabel=true and returns once Kueue's pod webhook
// acts there: a dry-run pod in a queue comes back with Kueue's admission gate. Until then a pod
// could slip past it ungated, since kube-apiserver learns of new webhook configurations, and
// Kueue of namespace labels, from informers a moment behind.
func (k *Kueue) WaitManaged(ctx context.Context, namespace string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, KueueNamespaceLabel)
	if _, err := k.client.CoreV1().Namespaces().Patch(ctx, namespace, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("harness: labelling namespace %s for kueue: %w", namespace, err)
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kueue-webhook-probe", Namespace: namespace,
			Labels: map[string]string{"kueue.x-k8s.io/queue-name": "kueue-webhook-probe"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "busybox:1.36"}}},
	}
	last := errors.New("no answer yet")
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, KueueWebhookTimeout, true, func(ctx context.Context) (bool, error) {
		out, err := k.client.CoreV1().Pods(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err != nil:
			last = err
		case !slices.ContainsFunc(out.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == kueueAdmissionGate }):
			last = fmt.Errorf("a dry-run pod came back without the gate %s", kueueAdmissionGate)
		default:
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("harness: kueue's pod webhook does not act in namespace %s within %s: %v\n--- last 20 lines of %s ---\n%s",
			namespace, KueueWebhookTimeout, last, k.LogPath, k.proc.Tail(20))
	}
	return nil
}

// Tail returns the last n lines of Kueue's log, for failure messages.
func (k *Kueue) Tail(n int) string { return k.proc.Tail(n) }

// Stop deletes the webhook configurations first, so that no pod is refused for want of a
// webhook that no longer answers, then stops Kueue. Its CRDs and what it created (Workloads,
// finalizers on the pods it managed) stay: the tests that made the workloads remove them while
// Kueue still runs. Safe to call more than once.
func (k *Kueue) Stop() {
	k.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := deleteKueueWebhooks(ctx, k.client); err != nil {
			k.logf("kueue: %v", err)
		}
		if k.proc != nil {
			k.proc.Stop()
		}
		k.logf("kueue stopped")
	})
}
