package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/thirdparty"
)

// TrainingOperatorBinary is the Kubeflow training-operator's file name in the cluster's BinDir,
// built by `make training-operator` (hack/build-training-operator.sh).
const TrainingOperatorBinary = "training-operator"

// What the training-operator v1.8.1 expects of its surroundings. Its webhook certificate
// rotator keeps the certificates in the Secret, updates the CA of the named webhook
// configuration, and waits for the Secret to be mounted at TrainingOperatorCertDir before it
// lets any controller start.
const (
	trainingOperatorNamespace = "kubeflow"
	trainingOperatorSecret    = "training-operator-webhook-cert"
	trainingOperatorWebhook   = "validator.training-operator.kubeflow.org"
	// TrainingOperatorCertDir is fixed in the operator (pkg/cert), so only one operator can run
	// on a machine at a time.
	TrainingOperatorCertDir = "/tmp/k8s-webhook-server/serving-certs"
	// TrainingOperatorReadyTimeout bounds StartTrainingOperator's wait for the certificates and
	// for the controllers to start.
	TrainingOperatorReadyTimeout = 2 * time.Minute
)

// trainingOperatorSchemes are the job kinds the operator is started for; each needs its CRD
// (thirdparty.TrainingOperatorCRDs), or the operator's manager stalls.
var trainingOperatorSchemes = []string{"tfjob", "mpijob", "pytorchjob"}

// TrainingOperator is a running Kubeflow training-operator.
type TrainingOperator struct {
	// GangSchedulerName is its --gang-scheduler-name ("" for none).
	GangSchedulerName string
	// LogPath is its output, in the cluster's WorkDir; each start appends to it.
	LogPath string

	client   kubernetes.Interface
	proc     *cluster.Component
	logf     func(format string, args ...any)
	stopOnce sync.Once
}

// StartTrainingOperator runs bin/training-operator against the cluster with the TFJob,
// MPIJob and PyTorchJob controllers, creating PodGroups for gangSchedulerName: "volcano" makes
// scheduling.volcano.sh/v1beta1 ones, any other name scheduling.x-k8s.io/v1alpha1 ones (the
// operator's own rule), "" none at all. It installs the CRDs the operator needs, sets up what its
// certificate rotator expects, and returns once the controllers run. Call Stop before starting
// another.
func StartTrainingOperator(ctx context.Context, c *cluster.Cluster, gangSchedulerName string,
	logf func(format string, args ...any)) (_ *TrainingOperator, err error) {
	began := time.Now()
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if err := checkBinary(c.BinDir, TrainingOperatorBinary, "training-operator"); err != nil {
		return nil, err
	}
	if err := installTrainingOperatorCRDs(ctx, c.RESTConfig, gangSchedulerName); err != nil {
		return nil, err
	}
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	if err := resetCertificateObjects(ctx, c.Client, port); err != nil {
		return nil, err
	}
	// Left over from a run that did not stop its operator: the rotator would take stale files
	// for mounted ones.
	if err := os.RemoveAll(TrainingOperatorCertDir); err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	o, from, err := launchTrainingOperator(c, gangSchedulerName, port, logf)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			o.Stop()
		}
	}()
	if err := o.waitReady(ctx, from); err != nil {
		return nil, err
	}
	logf("training-operator (gang scheduler %q) ready in %s", gangSchedulerName, time.Since(began).Round(time.Millisecond))
	return o, nil
}

// launchTrainingOperator starts the process. from is the size its log had before, where this
// run's output begins.
func launchTrainingOperator(c *cluster.Cluster, gangSchedulerName string, webhookPort int,
	logf func(string, ...any)) (o *TrainingOperator, from int64, err error) {
	args := []string{
		"--kubeconfig", c.AdminKubeconfig,
		"--metrics-bind-address=127.0.0.1:0",
		"--health-probe-bind-address=127.0.0.1:0",
		// 9443 by default; a free port keeps a busy 9443 from stopping the manager.
		"--webhook-server-port=" + strconv.Itoa(webhookPort),
	}
	if gangSchedulerName != "" {
		args = append(args, "--gang-scheduler-name="+gangSchedulerName)
	}
	for _, s := range trainingOperatorSchemes {
		args = append(args, "--enable-scheme="+s)
	}
	from = logOffset(filepath.Join(c.WorkDir, TrainingOperatorBinary+".log"))
	proc, err := c.StartComponent(TrainingOperatorBinary, TrainingOperatorBinary, args...)
	if err != nil {
		return nil, 0, err
	}
	return &TrainingOperator{GangSchedulerName: gangSchedulerName, LogPath: proc.LogPath(),
		client: c.Client, proc: proc, logf: logf}, from, nil
}

// installTrainingOperatorCRDs installs the TFJob, MPIJob and PyTorchJob CRDs and the PodGroup CRD
// of the gang scheduler: the operator exits at once when the PodGroup kind it is to create is unknown.
func installTrainingOperatorCRDs(ctx context.Context, cfg *rest.Config, gangSchedulerName string) error {
	sets := []func(context.Context) ([]string, error){thirdparty.TrainingOperatorCRDs}
	switch {
	case gangSchedulerName == "":
	case strings.EqualFold(gangSchedulerName, "volcano"):
		sets = append(sets, thirdparty.VolcanoCRDs)
	default:
		sets = append(sets, thirdparty.SchedulerPluginsCRDs)
	}
	var paths []string
	for _, set := range sets {
		p, err := set(ctx)
		if err != nil {
			return err
		}
		paths = append(paths, p...)
	}
	return thirdparty.InstallCRDs(ctx, cfg, paths...)
}

// resetCertificateObjects creates the namespace, an empty Secret for the rotator to fill and
// the webhook configuration for it to put its CA in, replacing any a previous operator left.
// The webhook's serving certificate names training-operator.kubeflow.svc, which kube-apiserver
// cannot reach on loopback, so the webhook has no rules: it exists for the rotator alone.
func resetCertificateObjects(ctx context.Context, cs kubernetes.Interface, webhookPort int) error {
	if err := ensureNamespace(ctx, cs, trainingOperatorNamespace); err != nil {
		return err
	}
	if err := deleteCertificateObjects(ctx, cs); err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: trainingOperatorSecret, Namespace: trainingOperatorNamespace}}
	if _, err := cs.CoreV1().Secrets(trainingOperatorNamespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("harness: secret %s: %w", trainingOperatorSecret, err)
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/validate-kubeflow-org-v1-tfjob", webhookPort)
	ignore, none := admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNone
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: trainingOperatorWebhook},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "validator.tfjob.training-operator.kubeflow.org",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
			FailurePolicy:           &ignore,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("harness: webhook configuration %s: %w", trainingOperatorWebhook, err)
	}
	return nil
}

// deleteCertificateObjects deletes the Secret and the webhook configuration, if there. The
// namespace stays: with no namespace controller running, a deleted namespace never goes away.
func deleteCertificateObjects(ctx context.Context, cs kubernetes.Interface) error {
	err := cs.CoreV1().Secrets(trainingOperatorNamespace).Delete(ctx, trainingOperatorSecret, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("harness: deleting secret %s: %w", trainingOperatorSecret, err)
	}
	err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, trainingOperatorWebhook, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("harness: deleting webhook configuration %s: %w", trainingOperatorWebhook, err)
	}
	return nil
}

// waitReady "mounts" the rotator's certificates, as a kubelet would mount the Secret, then waits
// for every controller to start its workers. from is where this run's log output begins.
func (o *TrainingOperator) waitReady(ctx context.Context, from int64) error {
	last := "waiting for the rotator to fill secret " + trainingOperatorNamespace + "/" + trainingOperatorSecret
	mounted := false
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, TrainingOperatorReadyTimeout, true, func(ctx context.Context) (bool, error) {
		if o.proc.Exited() {
			return false, fmt.Errorf("exited (%v)", o.proc.ExitErr())
		}
		if !mounted {
			ok, err := o.mountCerts(ctx)
			if !ok || err != nil {
				return false, err
			}
			mounted = true
			last = "waiting for the controllers to start"
		}
		return o.controllersStarted(from)
	})
	if err != nil {
		if wait.Interrupted(err) && ctx.Err() == nil {
			err = fmt.Errorf("not ready within %s", TrainingOperatorReadyTimeout)
		}
		return fmt.Errorf("harness: training-operator %v (%s)\n--- last 30 lines of %s ---\n%s",
			err, last, o.LogPath, o.proc.Tail(30))
	}
	return nil
}

// certFiles are the Secret's keys the operator reads from its certificate folder.
var certFiles = []string{"tls.crt", "tls.key", "ca.crt"}

// mountCerts copies the certificates into TrainingOperatorCertDir once the rotator has put them
// in the Secret; false means not yet.
func (o *TrainingOperator) mountCerts(ctx context.Context) (bool, error) {
	s, err := o.client.CoreV1().Secrets(trainingOperatorNamespace).Get(ctx, trainingOperatorSecret, metav1.GetOptions{})
	if err != nil {
		return false, nil // transient; the deadline reports it
	}
	for _, f := range certFiles {
		if len(s.Data[f]) == 0 {
			return false, nil
		}
	}
	if err := os.MkdirAll(TrainingOperatorCertDir, 0o700); err != nil {
		return false, err
	}
	for _, f := range certFiles {
		if err := os.WriteFile(filepath.Join(TrainingOperatorCertDir, f), s.Data[f], 0o600); err != nil {
			return false, err
		}
	}
	return true, nil
}

// controllersStarted says whether this run's log (from offset from) has controller-runtime's
// "Starting workers" line for every scheme's controller.
func (o *TrainingOperator) controllersStarted(from int64) (bool, error) {
	out, err := logSince(o.LogPath, from)
	if err != nil {
		return false, err
	}
	for _, s := range trainingOperatorSchemes {
		if !hasLine(out, "Starting workers", `"`+s+`-controller"`) {
			return false, nil
		}
	}
	return true, nil
}

// Tail returns the last n lines of the operator's log, for failure messages.
func (o *TrainingOperator) Tail(n int) string { return o.proc.Tail(n) }

// Stop stops the operator, removes its certificate folder, and deletes the Secret and webhook
// configuration StartTrainingOperator made, so another can start (with another gang scheduler)
// against the same cluster. What the operator created for jobs (PodGroups, pods, services) is
// left to the tests that made the jobs. Safe to call more than once.
func (o *TrainingOperator) Stop() {
	o.stopOnce.Do(func() {
		o.proc.Stop()
		if err := os.RemoveAll(TrainingOperatorCertDir); err != nil {
			o.logf("training-operator: removing %s: %v", TrainingOperatorCertDir, err)
		}
		_ = os.Remove(filepath.Dir(TrainingOperatorCertDir)) // only if empty: it is shared /tmp
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := deleteCertificateObjects(ctx, o.client); err != nil {
			o.logf("training-operator: %v", err)
		}
		o.logf("training-operator stopped")
	})
}
