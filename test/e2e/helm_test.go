package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	schedconfigv1 "k8s.io/kube-scheduler/config/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/harness"
)

// helmChartDir is the chart under test, from the repository root.
const helmChartDir = "deploy/helm/lockstep"

// TestHelmChart lints the chart, renders it with bin/helm (`make helm`), applies every object to
// the suite's apiserver (server-side apply with strict field validation, no dry run) and reads
// them back: the Deployment's two containers and lockstep's flags, the scheduler configuration,
// the generated certificates, the RBAC against deploy/manifests/rbac.yaml, the FlowSchema,
// NetworkPolicy and gpu-agent against their shipped counterparts. Then a real kube-scheduler runs
// with the chart's configuration, its client certificate and the chart's ServiceAccount, and
// calls a stand-in for lockstep (the chart's serving certificate, client certificates required)
// that binds a pod with the same ServiceAccount.
func TestHelmChart(t *testing.T) {
	h := newHelmRunner(t)
	chart := filepath.Join(env.root, helmChartDir)
	vals := readChartValues(t)

	t.Run("lint", func(t *testing.T) {
		for _, set := range []string{"", "gpuAgent.enabled=true", "tls.serverSecret=lockstep-server,tls.clientSecret=lockstep-client"} {
			args := []string{"lint", "--strict", chart}
			if set != "" {
				args = append(args, "--set", set)
			}
			h.run(t, args...)
		}
	})

	t.Run("existing TLS secrets", func(t *testing.T) {
		out := h.run(t, "template", "named", chart, "--namespace", "tls-test",
			"--set", "tls.serverSecret=my-server,tls.clientSecret=my-client")
		var secrets []string
		var dep *appsv1.Deployment
		for _, o := range decodeYAMLDocs(t, out) {
			switch o.GetKind() {
			case "Secret":
				secrets = append(secrets, o.GetName())
			case "Deployment":
				dep = &appsv1.Deployment{}
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, dep))
			}
		}
		require.Empty(t, secrets, "with both Secrets named the chart must generate none")
		require.NotNil(t, dep)
		assert.ElementsMatch(t, []string{"my-server", "my-client"}, projectedSecrets(dep.Spec.Template.Spec))
		_, stderr, err := h.exec("template", "half", chart, "--set", "tls.serverSecret=my-server")
		require.Error(t, err, "naming one TLS Secret without the other must fail")
		require.Contains(t, stderr, "tls.serverSecret and tls.clientSecret go together")
	})

	s := newScenarioWithNodes(t, cluster.NodeSpec{Name: "helm-0"})
	rel := &helmRelease{ns: s.ns, name: s.ns, fullname: s.ns + "-lockstep", vals: vals}
	rendered := h.run(t, "template", rel.name, chart, "--namespace", rel.ns, "--set", "gpuAgent.enabled=true")
	objs := decodeYAMLDocs(t, rendered)
	ap := newApplier(t)
	checkRenderedObjects(t, ap, rel, objs)
	ap.applyAll(t, s.ctx, objs)
	rel.read(t, s.ctx)

	t.Run("deployment", func(t *testing.T) { checkHelmDeployment(t, rel) })
	t.Run("scheduler config", func(t *testing.T) { checkHelmSchedulerConfig(t, rel) })
	t.Run("certificates", func(t *testing.T) { checkHelmCertificates(t, rel) })
	t.Run("certificates kept on upgrade", func(t *testing.T) {
		// `helm template` has no cluster, so lookup finds nothing and every render makes new
		// certificates; with the cluster (what `helm upgrade` has) the existing ones are kept.
		secretsOf := func(out string) map[string]map[string]any {
			got := map[string]map[string]any{}
			for _, o := range decodeYAMLDocs(t, out) {
				if o.GetKind() == "Secret" {
					data, _, _ := unstructured.NestedMap(o.Object, "data")
					got[o.GetName()] = data
				}
			}
			return got
		}
		applied := map[string]map[string]any{}
		for _, sec := range []*corev1.Secret{rel.serverSecret, rel.clientSecret} {
			applied[sec.Name] = map[string]any{}
			for k, v := range sec.Data {
				applied[sec.Name][k] = base64.StdEncoding.EncodeToString(v)
			}
		}
		upgrade := h.run(t, "template", rel.name, chart, "--namespace", rel.ns, "--set", "gpuAgent.enabled=true",
			"--dry-run=server", "--kubeconfig", env.cluster.AdminKubeconfig)
		require.Equal(t, applied, secretsOf(upgrade), "a render against the cluster must keep the Secrets it finds")
		fresh := secretsOf(h.run(t, "template", rel.name, chart, "--namespace", rel.ns))
		require.NotEqual(t, applied[rel.serverSecret.Name]["tls.crt"], fresh[rel.serverSecret.Name]["tls.crt"],
			"without the cluster a render makes new certificates (so the check above is not vacuous)")
	})
	t.Run("install dry run", func(t *testing.T) {
		// helm's own path to the cluster: it validates every object against the apiserver's
		// OpenAPI and renders NOTES.txt. Another release name: the objects above carry no Helm
		// ownership, so helm would refuse to adopt them.
		out := h.run(t, "install", rel.name+"-dry", chart, "--namespace", rel.ns, "--set", "gpuAgent.enabled=true",
			"--dry-run=server", "--kubeconfig", env.cluster.AdminKubeconfig)
		_, notes, ok := strings.Cut(out, "\nNOTES:\n")
		require.True(t, ok, "no NOTES in:\n%s", out)
		t.Logf("NOTES:\n%s", notes)
		assert.Contains(t, notes, "port-forward deployment/"+rel.name+"-dry-lockstep 8889:8889")
		assert.Contains(t, notes, "  - lockstep\n")
	})
	t.Run("rbac", func(t *testing.T) { checkHelmRBAC(t, s.ctx, rel) })
	t.Run("flowschema, networkpolicy, gpu-agent", func(t *testing.T) { checkHelmOthers(t, s.ctx, rel) })
	t.Run("kube-scheduler calls lockstep over mutual TLS", func(t *testing.T) { checkHelmSchedulerCallsExtender(t, s, rel) })
}

// helmRelease is the applied release, read back from the apiserver.
type helmRelease struct {
	ns, name, fullname string
	vals               chartValues
	dep                *appsv1.Deployment
	scheduler, sidecar *corev1.Container
	configMap          *corev1.ConfigMap
	cfg                schedconfigv1.KubeSchedulerConfiguration
	serverSecret       *corev1.Secret
	clientSecret       *corev1.Secret
}

func (r *helmRelease) read(t *testing.T, ctx context.Context) {
	t.Helper()
	var err error
	r.dep, err = env.client.AppsV1().Deployments(r.ns).Get(ctx, r.fullname, metav1.GetOptions{})
	require.NoError(t, err)
	for i := range r.dep.Spec.Template.Spec.Containers {
		switch c := &r.dep.Spec.Template.Spec.Containers[i]; c.Name {
		case "kube-scheduler":
			r.scheduler = c
		case "lockstep":
			r.sidecar = c
		}
	}
	require.NotNil(t, r.scheduler, "no kube-scheduler container")
	require.NotNil(t, r.sidecar, "no lockstep container")
	r.configMap, err = env.client.CoreV1().ConfigMaps(r.ns).Get(ctx, r.fullname+"-config", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict([]byte(r.configMap.Data["scheduler.yaml"]), &r.cfg), "scheduler.yaml must parse strictly")
	r.serverSecret, err = env.client.CoreV1().Secrets(r.ns).Get(ctx, r.fullname+"-server-tls", metav1.GetOptions{})
	require.NoError(t, err)
	r.clientSecret, err = env.client.CoreV1().Secrets(r.ns).Get(ctx, r.fullname+"-client-tls", metav1.GetOptions{})
	require.NoError(t, err)
}

// lease is the leader-election Lease, namespace/name, as the scheduler configuration names it.
func (r *helmRelease) lease() string {
	return r.cfg.LeaderElection.ResourceNamespace + "/" + r.cfg.LeaderElection.ResourceName
}

// file reads what container c sees at path p, through its volume mounts.
func (r *helmRelease) file(t *testing.T, c *corev1.Container, p string) []byte {
	t.Helper()
	ref, err := resolveMountedFile(r.dep.Spec.Template.Spec, c, p)
	require.NoError(t, err, "container %s: %s", c.Name, p)
	ctx := context.Background()
	switch ref.kind {
	case "Secret":
		sec, err := env.client.CoreV1().Secrets(r.ns).Get(ctx, ref.name, metav1.GetOptions{})
		require.NoError(t, err)
		data, ok := sec.Data[ref.key]
		require.True(t, ok, "Secret %s has no key %s (container %s reads it at %s)", ref.name, ref.key, c.Name, p)
		return data
	default:
		cm, err := env.client.CoreV1().ConfigMaps(r.ns).Get(ctx, ref.name, metav1.GetOptions{})
		require.NoError(t, err)
		data, ok := cm.Data[ref.key]
		require.True(t, ok, "ConfigMap %s has no key %s (container %s reads it at %s)", ref.name, ref.key, c.Name, p)
		return []byte(data)
	}
}

func checkHelmDeployment(t *testing.T, r *helmRelease) {
	spec := r.dep.Spec.Template.Spec
	var names []string
	for _, c := range spec.Containers {
		names = append(names, c.Name)
	}
	require.Equal(t, []string{"kube-scheduler", "lockstep"}, names)
	require.Equal(t, int32(r.vals.Replicas), *r.dep.Spec.Replicas)
	assert.Equal(t, r.fullname, spec.ServiceAccountName)
	assert.Equal(t, "system-cluster-critical", spec.PriorityClassName)
	require.NotNil(t, spec.SecurityContext)
	assert.True(t, *spec.SecurityContext.RunAsNonRoot)
	assert.Equal(t, int64(65532), *spec.SecurityContext.RunAsUser)
	for _, c := range spec.Containers {
		require.NotNil(t, c.SecurityContext, c.Name)
		assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation, c.Name)
		assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem, c.Name)
		assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop, c.Name)
	}

	assert.Equal(t, r.vals.Scheduler.Image.Repository+":"+r.vals.Scheduler.Image.Tag, r.scheduler.Image)
	assert.Equal(t, "registry.k8s.io/kube-scheduler:"+env.cluster.Release.Version, r.scheduler.Image,
		"the chart's default scheduler is the release the suite runs")
	assert.Equal(t, []string{"kube-scheduler", "--config=/etc/lockstep/scheduler.yaml"}, r.scheduler.Command)
	assert.Equal(t, r.vals.Lockstep.Image.Repository+":"+readChartAppVersion(t), r.sidecar.Image, "lockstep's image tag defaults to the appVersion")

	port := r.vals.Lockstep.Port
	require.NotZero(t, port)
	require.Equal(t, []string{
		fmt.Sprintf("--listen=0.0.0.0:%d", port),
		"--tls-cert-file=/etc/lockstep/tls/tls.crt",
		"--tls-private-key-file=/etc/lockstep/tls/tls.key",
		"--client-ca-file=/etc/lockstep/tls/ca.crt",
		"--debug-listen=127.0.0.1:8889",
		"--scheduler-config=/etc/lockstep/scheduler.yaml",
		"--bind-wait=25s",
		"--leader-election-lease=" + r.ns + "/" + r.fullname,
	}, r.sidecar.Args)
	assert.Equal(t, r.lease(), flagValue(r.sidecar.Args, "--leader-election-lease"),
		"lockstep must follow the Lease its scheduler elects its leader with")

	// Probes: HTTPS on lockstep's port (open without a client certificate) and the scheduler's.
	for _, p := range []struct {
		c       *corev1.Container
		probe   *corev1.Probe
		path    string
		port    int
		purpose string
	}{
		{r.sidecar, r.sidecar.LivenessProbe, "/healthz", port, "lockstep liveness"},
		{r.sidecar, r.sidecar.ReadinessProbe, "/readyz", port, "lockstep readiness"},
		{r.scheduler, r.scheduler.LivenessProbe, "/livez", 10259, "kube-scheduler liveness"},
		{r.scheduler, r.scheduler.ReadinessProbe, "/readyz", 10259, "kube-scheduler readiness"},
	} {
		require.NotNil(t, p.probe, p.purpose)
		require.NotNil(t, p.probe.HTTPGet, p.purpose)
		assert.Equal(t, corev1.URISchemeHTTPS, p.probe.HTTPGet.Scheme, p.purpose)
		assert.Equal(t, p.path, p.probe.HTTPGet.Path, p.purpose)
		assert.Equal(t, p.port, containerPort(t, p.c, p.probe.HTTPGet.Port), p.purpose)
	}

	// Each container sees the scheduler configuration, and only its own key material.
	assert.Equal(t, r.configMap.Data["scheduler.yaml"], string(r.file(t, r.scheduler, "/etc/lockstep/scheduler.yaml")))
	assert.Equal(t, r.configMap.Data["scheduler.yaml"], string(r.file(t, r.sidecar, flagValue(r.sidecar.Args, "--scheduler-config"))))
	_, err := resolveMountedFile(spec, r.scheduler, flagValue(r.sidecar.Args, "--tls-private-key-file"))
	assert.Error(t, err, "kube-scheduler must not see lockstep's private key")
	_, err = resolveMountedFile(spec, r.sidecar, r.cfg.Extenders[0].TLSConfig.KeyFile)
	assert.Error(t, err, "lockstep must not see kube-scheduler's private key")
	for _, c := range spec.Containers {
		for _, m := range c.VolumeMounts {
			assert.True(t, m.ReadOnly || m.MountPath == "/tmp", "container %s mounts %s writable", c.Name, m.MountPath)
		}
	}
	for _, sec := range []*corev1.Secret{r.serverSecret, r.clientSecret} {
		assert.Equal(t, corev1.SecretTypeTLS, sec.Type, sec.Name)
	}
}

func checkHelmSchedulerConfig(t *testing.T, r *helmRelease) {
	cfg := r.cfg
	require.Equal(t, schedconfigv1.SchemeGroupVersion.String(), cfg.APIVersion)
	require.Equal(t, "KubeSchedulerConfiguration", cfg.Kind)
	require.NotNil(t, cfg.LeaderElection.LeaderElect)
	assert.True(t, *cfg.LeaderElection.LeaderElect)
	assert.Equal(t, r.fullname, cfg.LeaderElection.ResourceName)
	assert.Equal(t, r.ns, cfg.LeaderElection.ResourceNamespace)
	assert.Empty(t, cfg.ClientConnection.Kubeconfig, "in-cluster config")

	// The shipped second-scheduler configuration is what the chart derives from: the same
	// profiles by default, the same extender stanza but for the transport.
	var shipped schedconfigv1.KubeSchedulerConfiguration
	raw, err := os.ReadFile(filepath.Join(env.root, "deploy/scheduler-config/lockstep-profile.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(raw, &shipped))
	assert.Equal(t, shipped.Profiles, cfg.Profiles)
	assert.Equal(t, shipped.PercentageOfNodesToScore, cfg.PercentageOfNodesToScore)
	require.Len(t, cfg.Extenders, 1)
	require.Len(t, shipped.Extenders, 1)
	ext := cfg.Extenders[0]
	assert.Equal(t, fmt.Sprintf("https://127.0.0.1:%d", r.vals.Lockstep.Port), ext.URLPrefix)
	assert.True(t, ext.EnableHTTPS)
	require.NotNil(t, ext.TLSConfig)
	assert.Equal(t, schedconfigv1.ExtenderTLSConfig{
		CertFile: "/etc/lockstep/scheduler-tls/tls.crt",
		KeyFile:  "/etc/lockstep/scheduler-tls/tls.key",
		CAFile:   "/etc/lockstep/scheduler-tls/ca.crt",
	}, *ext.TLSConfig)
	assert.Equal(t, 30*time.Second, ext.HTTPTimeout.Duration)
	same, want := ext, shipped.Extenders[0]
	same.URLPrefix, same.EnableHTTPS, same.TLSConfig = want.URLPrefix, want.EnableHTTPS, want.TLSConfig
	assert.Equal(t, want, same, "verbs, weight, nodeCacheCapable, httpTimeout and ignorable as shipped")

	// lockstep refuses to start unless --bind-wait < httpTimeout - 1s.
	bindWait, err := time.ParseDuration(flagValue(r.sidecar.Args, "--bind-wait"))
	require.NoError(t, err)
	assert.Less(t, bindWait, ext.HTTPTimeout.Duration-time.Second)

	// urlPrefix reaches lockstep's --listen port in the same pod.
	u, err := url.Parse(ext.URLPrefix)
	require.NoError(t, err)
	_, listenPort, err := netSplit(flagValue(r.sidecar.Args, "--listen"))
	require.NoError(t, err)
	assert.Equal(t, listenPort, u.Port())
}

func checkHelmCertificates(t *testing.T, r *helmRelease) {
	ext := r.cfg.Extenders[0]
	require.NotNil(t, ext.TLSConfig)
	// What each process reads, through its container's mounts.
	serverCert := r.file(t, r.sidecar, flagValue(r.sidecar.Args, "--tls-cert-file"))
	serverKey := r.file(t, r.sidecar, flagValue(r.sidecar.Args, "--tls-private-key-file"))
	clientCA := r.file(t, r.sidecar, flagValue(r.sidecar.Args, "--client-ca-file"))
	clientCert := r.file(t, r.scheduler, ext.TLSConfig.CertFile)
	clientKey := r.file(t, r.scheduler, ext.TLSConfig.KeyFile)
	serverCA := r.file(t, r.scheduler, ext.TLSConfig.CAFile)
	assert.Equal(t, r.serverSecret.Data["tls.crt"], serverCert)
	assert.Equal(t, r.clientSecret.Data["tls.crt"], clientCert)

	serverPair, err := tls.X509KeyPair(serverCert, serverKey)
	require.NoError(t, err, "lockstep's key must match its certificate")
	clientPair, err := tls.X509KeyPair(clientCert, clientKey)
	require.NoError(t, err, "kube-scheduler's key must match its certificate")
	server, client := serverPair.Leaf, clientPair.Leaf

	u, err := url.Parse(ext.URLPrefix)
	require.NoError(t, err)
	for _, host := range []string{u.Hostname(), "localhost"} {
		_, err = server.Verify(x509.VerifyOptions{DNSName: host, Roots: certPool(t, serverCA),
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		assert.NoError(t, err, "lockstep's certificate must verify for %s against the scheduler's caFile", host)
	}
	_, err = client.Verify(x509.VerifyOptions{Roots: certPool(t, clientCA),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.NoError(t, err, "kube-scheduler's certificate must verify against lockstep's --client-ca-file")
	assert.False(t, server.IsCA)
	assert.False(t, client.IsCA)
	// Helm's genSignedCert gives every certificate both usages (the chart says so).
	assert.Contains(t, server.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	assert.Contains(t, client.ExtKeyUsage, x509.ExtKeyUsageClientAuth)

	// And a handshake as the two processes would make it.
	srv := mtlsServer(t, serverPair, clientCA, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.WriteString(w, req.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{clientPair}, RootCAs: certPool(t, serverCA)}}}
	resp, err := hc.Get(srv.URL + "/filter")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, client.Subject.CommonName, string(body))
	noCert := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: certPool(t, serverCA)}}}
	if resp, err := noCert.Get(srv.URL + "/filter"); err == nil {
		resp.Body.Close()
		t.Errorf("a client without a certificate got through a server requiring one")
	}
}

func checkHelmRBAC(t *testing.T, ctx context.Context, r *helmRelease) {
	shipped, err := harness.DecodeFile(filepath.Join(env.root, "deploy/manifests/rbac.yaml"))
	require.NoError(t, err)
	const shippedNS, shippedSA, shippedLease = "lockstep-system", "lockstep-scheduler", "lockstep-scheduler"
	sa := "system:serviceaccount:" + r.ns + ":" + r.fullname

	// 1. lockstep's ClusterRole grants what deploy/manifests' lockstep-extender grants, no more.
	var shippedExtender rbacv1.ClusterRole
	fromShipped(t, shipped, "ClusterRole", "lockstep-extender", &shippedExtender)
	chartExtender, err := env.client.RbacV1().ClusterRoles().Get(ctx, r.fullname+"-extender", metav1.GetOptions{})
	require.NoError(t, err)
	for _, a := range expandRules(shippedExtender.Rules) {
		assert.True(t, rulesAllow(chartExtender.Rules, a), "the chart's ClusterRole lacks %s", a)
	}
	for _, a := range expandRules(chartExtender.Rules) {
		assert.True(t, rulesAllow(shippedExtender.Rules, a), "the chart's ClusterRole grants %s beyond deploy/manifests/rbac.yaml", a)
	}

	// 2. Everything deploy/manifests grants the scheduler pod's ServiceAccount, through whichever
	// role (its own or built in), the chart grants its ServiceAccount: asked of the apiserver.
	var want []access
	for _, o := range shipped {
		if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
			continue
		}
		var b rbacv1.RoleBinding // ClusterRoleBinding has the same fields
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b))
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Namespace == shippedNS && s.Name == shippedSA
		}) {
			continue
		}
		var rules []rbacv1.PolicyRule
		switch {
		case b.RoleRef.Kind == "ClusterRole" && hasShipped(shipped, "ClusterRole", b.RoleRef.Name):
			var cr rbacv1.ClusterRole
			fromShipped(t, shipped, "ClusterRole", b.RoleRef.Name, &cr)
			rules = cr.Rules
		case b.RoleRef.Kind == "ClusterRole":
			cr, err := env.client.RbacV1().ClusterRoles().Get(ctx, b.RoleRef.Name, metav1.GetOptions{})
			require.NoError(t, err, "built-in ClusterRole %s", b.RoleRef.Name)
			rules = cr.Rules
		case hasShipped(shipped, "Role", b.RoleRef.Name):
			var role rbacv1.Role
			fromShipped(t, shipped, "Role", b.RoleRef.Name, &role)
			rules = role.Rules
		default:
			role, err := env.client.RbacV1().Roles(b.Namespace).Get(ctx, b.RoleRef.Name, metav1.GetOptions{})
			require.NoError(t, err, "built-in Role %s/%s", b.Namespace, b.RoleRef.Name)
			rules = role.Rules
		}
		ns := b.Namespace // "" for a ClusterRoleBinding: everywhere
		if ns == shippedNS {
			ns = r.ns
		}
		for _, a := range expandRules(rules) {
			a.namespace = ns
			if a.name == shippedLease {
				a.name = r.fullname
			}
			want = append(want, a)
		}
	}
	require.NotEmpty(t, want)
	// PLUS lockstep following the leader-election Lease, in the release namespace only.
	for _, verb := range []string{"get", "list", "watch"} {
		want = append(want, access{group: "coordination.k8s.io", resource: "leases", verb: verb, namespace: r.ns})
	}
	// RBAC reaches the apiserver's authorizer through its informers: ask again what was denied
	// until nothing is.
	denied := want
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var still []access
		for _, a := range denied {
			if ok, err := allowed(ctx, sa, r.ns, a); err != nil || !ok {
				still = append(still, a)
			}
		}
		denied = still
		return len(denied) == 0, nil
	})
	require.Empty(t, denied, "%s is denied these", sa)
	t.Logf("%s may do all %d things deploy/manifests grants lockstep-system/%s, plus follow its Lease", sa, len(want)-3, shippedSA)
	ok, err := allowed(ctx, sa, r.ns, access{group: "coordination.k8s.io", resource: "leases", verb: "list", namespace: "default"})
	require.NoError(t, err)
	assert.False(t, ok, "the Lease grant must stay in the release namespace")

	// The Role names the Lease the scheduler configuration names.
	role, err := env.client.RbacV1().Roles(r.ns).Get(ctx, r.fullname+":leader-election", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, rulesAllow(role.Rules, access{group: "coordination.k8s.io", resource: "leases", verb: "update", name: r.cfg.LeaderElection.ResourceName}))
}

func checkHelmOthers(t *testing.T, ctx context.Context, r *helmRelease) {
	shipped := shippedManifestObjects(t)

	var shippedFS flowcontrolv1.FlowSchema
	fromShipped(t, shipped, "FlowSchema", "lockstep-bindings", &shippedFS)
	fs, err := env.client.FlowcontrolV1().FlowSchemas().Get(ctx, r.fullname+"-bindings", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, shippedFS.Spec.PriorityLevelConfiguration, fs.Spec.PriorityLevelConfiguration)
	assert.Equal(t, shippedFS.Spec.MatchingPrecedence, fs.Spec.MatchingPrecedence)
	assert.Equal(t, shippedFS.Spec.DistinguisherMethod, fs.Spec.DistinguisherMethod)
	require.Len(t, fs.Spec.Rules, 1)
	require.Len(t, shippedFS.Spec.Rules, 1)
	assert.Equal(t, shippedFS.Spec.Rules[0].ResourceRules, fs.Spec.Rules[0].ResourceRules)
	assert.Equal(t, []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
		ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: r.ns, Name: r.fullname}}}, fs.Spec.Rules[0].Subjects)

	np, err := env.client.NetworkingV1().NetworkPolicies(r.ns).Get(ctx, r.fullname, metav1.GetOptions{})
	require.NoError(t, err)
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	require.NoError(t, err)
	assert.True(t, sel.Matches(labels.Set(r.dep.Spec.Template.Labels)), "the NetworkPolicy must select the scheduler pod")
	require.Len(t, np.Spec.Ingress, 1)
	var ports []int
	for _, p := range np.Spec.Ingress[0].Ports {
		ports = append(ports, p.Port.IntValue())
	}
	assert.ElementsMatch(t, []int{r.vals.Lockstep.Port, 10259}, ports)

	// gpu-agent, against deploy/gpu-agent.
	agent := r.fullname + "-gpu-agent"
	ds, err := env.client.AppsV1().DaemonSets(r.ns).Get(ctx, agent, metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, sel.Matches(labels.Set(ds.Spec.Template.Labels)), "the scheduler's NetworkPolicy must not select gpu-agent pods")
	// The shipped objects as the suite applied them (harness.Up), so that both sides carry the
	// apiserver's defaults.
	shippedDS, err := env.client.AppsV1().DaemonSets("lockstep-system").Get(ctx, "lockstep-gpu-agent", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, agent, ds.Spec.Template.Spec.ServiceAccountName)
	assert.Equal(t, r.sidecar.Image, ds.Spec.Template.Spec.Containers[0].Image)
	for _, f := range []func(*corev1.PodSpec) any{
		func(p *corev1.PodSpec) any { return p.NodeSelector },
		func(p *corev1.PodSpec) any { return p.Tolerations },
		func(p *corev1.PodSpec) any { return p.RuntimeClassName },
		func(p *corev1.PodSpec) any { return p.Containers[0].Command },
		func(p *corev1.PodSpec) any { return p.Containers[0].Args },
		func(p *corev1.PodSpec) any { return p.Containers[0].Env },
		func(p *corev1.PodSpec) any { return p.Containers[0].Resources },
	} {
		assert.Equal(t, f(&shippedDS.Spec.Template.Spec), f(&ds.Spec.Template.Spec))
	}
	var shippedCR rbacv1.ClusterRole
	fromShipped(t, shipped, "ClusterRole", "lockstep-gpu-agent", &shippedCR)
	cr, err := env.client.RbacV1().ClusterRoles().Get(ctx, agent, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, shippedCR.Rules, cr.Rules)
	crb, err := env.client.RbacV1().ClusterRoleBindings().Get(ctx, agent, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, agent, crb.RoleRef.Name)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: agent, Namespace: r.ns}}, crb.Subjects)
	_, err = env.client.CoreV1().ServiceAccounts(r.ns).Get(ctx, agent, metav1.GetOptions{})
	require.NoError(t, err)
	// The admission policy is the shipped one, for this release's ServiceAccount.
	shippedVAP, err := env.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "lockstep-gpu-agent", metav1.GetOptions{})
	require.NoError(t, err)
	vap, err := env.client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, agent, metav1.GetOptions{})
	require.NoError(t, err)
	wantSpec := shippedVAP.Spec.DeepCopy()
	for i := range wantSpec.MatchConditions {
		wantSpec.MatchConditions[i].Expression = strings.ReplaceAll(wantSpec.MatchConditions[i].Expression,
			"system:serviceaccount:lockstep-system:lockstep-gpu-agent", "system:serviceaccount:"+r.ns+":"+agent)
	}
	assert.Equal(t, wantSpec.MatchConditions, vap.Spec.MatchConditions)
	assert.Equal(t, wantSpec.Validations, vap.Spec.Validations)
	assert.Equal(t, wantSpec.Variables, vap.Spec.Variables)
	assert.Equal(t, wantSpec.MatchConstraints.ResourceRules, vap.Spec.MatchConstraints.ResourceRules)
	vapb, err := env.client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, agent, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, agent, vapb.Spec.PolicyName)
	assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, vapb.Spec.ValidationActions)
}

// checkHelmSchedulerCallsExtender runs the suite's kube-scheduler with the chart's configuration (as
// the kube-scheduler container reads it, changed only for loopback: the apiserver, a profile of
// the test's own so that no other test's pods are touched, and the certificate files' paths) and
// a kubeconfig of the chart's ServiceAccount. A stand-in for lockstep serves the chart's serving
// certificate, demands a client certificate signed by lockstep's client CA, passes the test's
// node, and binds the pod with the ServiceAccount's token, as lockstep would.
func checkHelmSchedulerCallsExtender(t *testing.T, s *scenario, r *helmRelease) {
	ctx := s.ctx
	expiry := int64(3600)
	tok, err := env.client.CoreV1().ServiceAccounts(r.ns).CreateToken(ctx, r.fullname,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	require.NoError(t, err)
	kubeconfig, err := env.cluster.KubeconfigForToken("helm-"+r.ns, tok.Status.Token)
	require.NoError(t, err)
	restCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	asSA, err := kubernetes.NewForConfig(restCfg)
	require.NoError(t, err)

	// The stand-in for lockstep, with the files the lockstep container reads.
	pair, err := tls.X509KeyPair(r.file(t, r.sidecar, flagValue(r.sidecar.Args, "--tls-cert-file")),
		r.file(t, r.sidecar, flagValue(r.sidecar.Args, "--tls-private-key-file")))
	require.NoError(t, err)
	var mu sync.Mutex
	calls := map[string][]string{} // verb -> client certificate CNs
	srv := mtlsServer(t, pair, r.file(t, r.sidecar, flagValue(r.sidecar.Args, "--client-ca-file")),
		http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			verb := strings.TrimPrefix(req.URL.Path, "/")
			mu.Lock()
			calls[verb] = append(calls[verb], req.TLS.PeerCertificates[0].Subject.CommonName)
			mu.Unlock()
			var answer any
			switch verb {
			case "filter":
				var args extenderv1.ExtenderArgs
				if err := json.NewDecoder(req.Body).Decode(&args); err != nil || args.NodeNames == nil {
					http.Error(w, "want ExtenderArgs with nodeNames (nodeCacheCapable)", http.StatusBadRequest)
					return
				}
				pass := []string{}
				failed := extenderv1.FailedNodesMap{}
				for _, n := range *args.NodeNames {
					if slices.Contains(s.nodes, n) {
						pass = append(pass, n)
					} else {
						failed[n] = "not this test's node"
					}
				}
				answer = extenderv1.ExtenderFilterResult{NodeNames: &pass, FailedNodes: failed}
			case "prioritize":
				answer = extenderv1.HostPriorityList{}
			case "bind":
				var args extenderv1.ExtenderBindingArgs
				if err := json.NewDecoder(req.Body).Decode(&args); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				res := extenderv1.ExtenderBindingResult{}
				err := asSA.CoreV1().Pods(args.PodNamespace).Bind(req.Context(), &corev1.Binding{
					ObjectMeta: metav1.ObjectMeta{Name: args.PodName, UID: args.PodUID},
					Target:     corev1.ObjectReference{Kind: "Node", Name: args.Node},
				}, metav1.CreateOptions{})
				if err != nil {
					res.Error = err.Error()
				}
				answer = res
			default:
				http.Error(w, "unexpected verb", http.StatusNotFound)
				return
			}
			_ = json.NewEncoder(w).Encode(answer)
		}))

	// The configuration, as the kube-scheduler container reads it, changed for loopback.
	in := r.file(t, r.scheduler, "/etc/lockstep/scheduler.yaml")
	out, err := cluster.RewriteSchedulerConfig(in, kubeconfig, srv.URL)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(out, &doc))
	doc["leaderElection"].(map[string]any)["leaderElect"] = true // the chart's Lease, under its Role
	schedulerName := "helm-" + r.ns
	doc["profiles"] = []any{map[string]any{"schedulerName": schedulerName}}
	dir := t.TempDir()
	tlsCfg := doc["extenders"].([]any)[0].(map[string]any)["tlsConfig"].(map[string]any)
	for _, key := range []string{"certFile", "keyFile", "caFile"} {
		p := filepath.Join(dir, key)
		require.NoError(t, os.WriteFile(p, r.file(t, r.scheduler, tlsCfg[key].(string)), 0o600))
		tlsCfg[key] = p
	}
	cfgPath := filepath.Join(dir, "scheduler.yaml")
	raw, err := yaml.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfgPath, raw, 0o600))
	port, err := cluster.FreePort()
	require.NoError(t, err)
	sched, err := env.cluster.StartComponent("kube-scheduler-helm", cluster.KubeScheduler,
		"--config", cfgPath, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--cert-dir", filepath.Join(dir, "certs"), "--v", "2")
	require.NoError(t, err)
	defer sched.Stop()

	pod := s.create(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "helm-pod"},
		Spec: corev1.PodSpec{SchedulerName: schedulerName, Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
	})
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := env.client.CoreV1().Pods(r.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", nil
	})
	if err != nil || sched.Exited() {
		mu.Lock()
		t.Logf("extender calls: %v", calls)
		mu.Unlock()
		t.Fatalf("the pod was not bound through the chart's extender stanza (%v); kube-scheduler log:\n%s", err, sched.Tail(40))
	}
	p, err := env.client.CoreV1().Pods(r.ns).Get(ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, s.nodes[0], p.Spec.NodeName)

	clientPair, err := tls.X509KeyPair(r.clientSecret.Data["tls.crt"], r.clientSecret.Data["tls.key"])
	require.NoError(t, err)
	mu.Lock()
	for _, verb := range []string{"filter", "bind"} {
		assert.NotEmpty(t, calls[verb], "kube-scheduler never called %s", verb)
		for _, cn := range calls[verb] {
			assert.Equal(t, clientPair.Leaf.Subject.CommonName, cn)
		}
	}
	mu.Unlock()

	// The scheduler took the chart's Lease, and lockstep's grant lets it read who holds it.
	ns, name, _ := strings.Cut(flagValue(r.sidecar.Args, "--leader-election-lease"), "/")
	lease, err := asSA.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "lockstep's ServiceAccount reads the Lease --leader-election-lease names")
	require.NotNil(t, lease.Spec.HolderIdentity)
	assert.NotEmpty(t, *lease.Spec.HolderIdentity)
	_, err = asSA.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	assert.NoError(t, err)
}

// checkRenderedObjects checks what `helm template` produced before it is applied: the kinds the
// chart should make, every namespaced object placed explicitly, and every object outside the
// release namespace named after the release, so that nothing clashes with deploy/manifests'.
func checkRenderedObjects(t *testing.T, ap *applier, r *helmRelease, objs []*unstructured.Unstructured) {
	t.Helper()
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	require.Equal(t, map[string]int{
		"ServiceAccount": 2, "ClusterRole": 2, "ClusterRoleBinding": 4, "Role": 1, "RoleBinding": 2,
		"FlowSchema": 1, "ConfigMap": 1, "Secret": 2, "Deployment": 1, "NetworkPolicy": 1,
		"DaemonSet": 1, "ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1,
	}, kinds)
	shipped := shippedManifestObjects(t)
	for _, o := range objs {
		what := o.GetKind() + " " + o.GetName()
		namespaced := ap.namespaced(t, o)
		if namespaced {
			require.NotEmpty(t, o.GetNamespace(), "%s: namespaced objects must name their namespace", what)
			if o.GetNamespace() == r.ns {
				continue
			}
			require.Equal(t, "kube-system", o.GetNamespace(), what)
		} else {
			require.Empty(t, o.GetNamespace(), what)
		}
		require.True(t, strings.HasPrefix(o.GetName(), r.fullname), "%s is outside the release namespace and must be named after the release", what)
		for _, sh := range shipped {
			require.False(t, sh.GetKind() == o.GetKind() && sh.GetName() == o.GetName() && sh.GetNamespace() == o.GetNamespace(),
				"%s clashes with deploy/'s", what)
		}
	}
}

// chartValues are the values.yaml defaults the test checks against.
type chartValues struct {
	Replicas  int `json:"replicas"`
	Scheduler struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
	} `json:"scheduler"`
	Lockstep struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
		Port int `json:"port"`
	} `json:"lockstep"`
}

func readChartValues(t *testing.T) chartValues {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.root, helmChartDir, "values.yaml"))
	require.NoError(t, err)
	var v chartValues
	require.NoError(t, yaml.Unmarshal(raw, &v))
	return v
}

func readChartAppVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.root, helmChartDir, "Chart.yaml"))
	require.NoError(t, err)
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &c))
	require.NotEmpty(t, c.AppVersion)
	return c.AppVersion
}

// helmRunner runs bin/helm with a home of its own, so no user's repositories or plugins matter.
type helmRunner struct {
	bin string
	env []string
}

func newHelmRunner(t *testing.T) *helmRunner {
	t.Helper()
	bin := filepath.Join(env.root, "bin", "helm")
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("%s not found: run `make helm`", bin)
	}
	home := t.TempDir()
	return &helmRunner{bin: bin, env: append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"))}
}

func (h *helmRunner) exec(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.bin, args...)
	cmd.Env = h.env
	cmd.Dir = env.root
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// run runs helm and fails the test with its output unless it succeeds; it returns stdout.
func (h *helmRunner) run(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, err := h.exec(args...)
	require.NoError(t, err, "helm %s:\n%s%s", strings.Join(args, " "), stdout, stderr)
	return stdout
}

func decodeYAMLDocs(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(docs), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, "decoding helm's output")
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// applier server-side applies objects through the dynamic client and deletes them at the end.
type applier struct {
	mapper meta.RESTMapper
	dyn    dynamic.Interface
}

func newApplier(t *testing.T) *applier {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(env.cluster.RESTConfig)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(env.cluster.RESTConfig)
	require.NoError(t, err)
	return &applier{mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), dyn: dyn}
}

func (a *applier) resource(t *testing.T, o *unstructured.Unstructured) (dynamic.ResourceInterface, bool) {
	t.Helper()
	gvk := o.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	require.NoError(t, err, "%s %s", gvk, o.GetName())
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.dyn.Resource(m.Resource).Namespace(o.GetNamespace()), true
	}
	return a.dyn.Resource(m.Resource), false
}

func (a *applier) namespaced(t *testing.T, o *unstructured.Unstructured) bool {
	_, ns := a.resource(t, o)
	return ns
}

// applyAll applies every object, strictly (an unknown field is an error), and deletes them when
// the test ends.
func (a *applier) applyAll(t *testing.T, ctx context.Context, objs []*unstructured.Unstructured) {
	t.Helper()
	var applied []*unstructured.Unstructured
	t.Cleanup(func() {
		for i := len(applied) - 1; i >= 0; i-- {
			o := applied[i]
			ri, _ := a.resource(t, o)
			if err := ri.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
		}
	})
	force := true
	for _, o := range objs {
		ri, _ := a.resource(t, o)
		data, err := json.Marshal(o.Object)
		require.NoError(t, err)
		_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
			FieldManager: "lockstep-e2e-helm", Force: &force, FieldValidation: "Strict"})
		require.NoError(t, err, "applying %s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
		applied = append(applied, o)
	}
}

// shippedManifestObjects are deploy/manifests' and deploy/gpu-agent's objects.
func shippedManifestObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var files []string
	for _, dir := range []string{"deploy/manifests", "deploy/gpu-agent"} {
		f, err := filepath.Glob(filepath.Join(env.root, dir, "*.yaml"))
		require.NoError(t, err)
		files = append(files, f...)
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		objs, err := harness.DecodeFile(f)
		require.NoError(t, err)
		out = append(out, objs...)
	}
	return out
}

func hasShipped(objs []*unstructured.Unstructured, kind, name string) bool {
	return slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == kind && o.GetName() == name })
}

// fromShipped converts the shipped object of kind and name into into.
func fromShipped(t *testing.T, objs []*unstructured.Unstructured, kind, name string, into any) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into))
			return
		}
	}
	t.Fatalf("deploy/ has no %s %s", kind, name)
}

// access is one thing a rule permits: a verb on a resource (or subresource, "pods/binding"),
// optionally of one name, or a verb on a non-resource URL.
type access struct {
	group, resource, verb, name, nonResourceURL string
	namespace                                   string // where it is asked; "" everywhere
}

func (a access) String() string {
	if a.nonResourceURL != "" {
		return a.verb + " " + a.nonResourceURL
	}
	s := fmt.Sprintf("%s %s.%s", a.verb, a.resource, a.group)
	if a.name != "" {
		s += " named " + a.name
	}
	if a.namespace != "" {
		s += " in " + a.namespace
	}
	return s
}

func expandRules(rules []rbacv1.PolicyRule) []access {
	var out []access
	for _, r := range rules {
		for _, verb := range r.Verbs {
			for _, u := range r.NonResourceURLs {
				out = append(out, access{verb: verb, nonResourceURL: u})
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					names := r.ResourceNames
					if len(names) == 0 {
						names = []string{""}
					}
					for _, n := range names {
						out = append(out, access{group: g, resource: res, verb: verb, name: n})
					}
				}
			}
		}
	}
	return out
}

// rulesAllow says whether rules permit a, as RBAC matches them (namespaces aside).
func rulesAllow(rules []rbacv1.PolicyRule, a access) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	for _, r := range rules {
		if !has(r.Verbs, a.verb) {
			continue
		}
		if a.nonResourceURL != "" {
			if has(r.NonResourceURLs, a.nonResourceURL) {
				return true
			}
			continue
		}
		if has(r.APIGroups, a.group) && has(r.Resources, a.resource) &&
			(len(r.ResourceNames) == 0 || (a.name != "" && slices.Contains(r.ResourceNames, a.name))) {
			return true
		}
	}
	return false
}

// allowed asks the apiserver whether the ServiceAccount user may do a.
func allowed(ctx context.Context, user, saNamespace string, a access) (bool, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + saNamespace, "system:authenticated"},
	}
	if a.nonResourceURL != "" {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.nonResourceURL, Verb: a.verb}
	} else {
		res, sub, _ := strings.Cut(a.resource, "/")
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Namespace: a.namespace, Verb: a.verb,
			Group: a.group, Resource: res, Subresource: sub, Name: a.name}
	}
	sar, err := env.client.AuthorizationV1().SubjectAccessReviews().Create(ctx,
		&authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}

// mountedFile is the ConfigMap or Secret key a container sees at a path.
type mountedFile struct{ kind, name, key string }

// resolveMountedFile follows a path in container c through its volume mounts to the ConfigMap or
// Secret key behind it (configMap, secret and projected volumes).
func resolveMountedFile(spec corev1.PodSpec, c *corev1.Container, p string) (mountedFile, error) {
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		mp := strings.TrimSuffix(m.MountPath, "/")
		if (p == mp || strings.HasPrefix(p, mp+"/")) && (mount == nil || len(mp) > len(mount.MountPath)) {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil {
		return mountedFile{}, fmt.Errorf("no volume is mounted at %s", p)
	}
	rel := path.Join(mount.SubPath, strings.TrimPrefix(strings.TrimPrefix(p, strings.TrimSuffix(mount.MountPath, "/")), "/"))
	var sources []corev1.VolumeProjection
	for _, v := range spec.Volumes {
		if v.Name != mount.Name {
			continue
		}
		switch {
		case v.Projected != nil:
			sources = v.Projected.Sources
		case v.Secret != nil:
			sources = []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: v.Secret.SecretName}, Items: v.Secret.Items}}}
		case v.ConfigMap != nil:
			sources = []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: v.ConfigMap.LocalObjectReference, Items: v.ConfigMap.Items}}}
		default:
			return mountedFile{}, fmt.Errorf("volume %s at %s holds neither a ConfigMap nor a Secret", v.Name, mount.MountPath)
		}
	}
	keyAt := func(items []corev1.KeyToPath) (string, bool) {
		if len(items) == 0 { // every key, as a file named after it
			return rel, !strings.Contains(rel, "/")
		}
		for _, it := range items {
			if path.Clean(it.Path) == rel {
				return it.Key, true
			}
		}
		return "", false
	}
	for _, src := range sources {
		if src.Secret != nil {
			if key, ok := keyAt(src.Secret.Items); ok {
				return mountedFile{"Secret", src.Secret.Name, key}, nil
			}
		}
		if src.ConfigMap != nil {
			if key, ok := keyAt(src.ConfigMap.Items); ok {
				return mountedFile{"ConfigMap", src.ConfigMap.Name, key}, nil
			}
		}
	}
	return mountedFile{}, fmt.Errorf("volume %s mounted at %s has no file %s", mount.Name, mount.MountPath, rel)
}

// projectedSecrets names the Secrets a pod's volumes project.
func projectedSecrets(spec corev1.PodSpec) []string {
	var out []string
	for _, v := range spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				out = append(out, s.Secret.Name)
			}
		}
	}
	return out
}

// flagValue is the value of --name=value in args, "" when absent.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

func containerPort(t *testing.T, c *corev1.Container, port intstr.IntOrString) int {
	t.Helper()
	if port.Type == intstr.Int {
		return port.IntValue()
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort)
		}
	}
	t.Fatalf("container %s has no port %q", c.Name, port.StrVal)
	return 0
}

func netSplit(hostPort string) (string, string, error) {
	u, err := url.Parse("//" + hostPort)
	if err != nil {
		return "", "", err
	}
	return u.Hostname(), u.Port(), nil
}

func certPool(t *testing.T, pemCerts []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pemCerts), "no certificate in the CA file")
	return pool
}

// mtlsServer serves handler on 127.0.0.1 with the certificate given, to clients whose
// certificate clientCA signed, as lockstep does for the extender verbs.
func mtlsServer(t *testing.T, cert tls.Certificate, clientCA []byte, handler http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(handler)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: certPool(t, clientCA),
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}
