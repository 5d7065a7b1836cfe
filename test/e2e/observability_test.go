package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/lockstep-sched/lockstep/test/lib/builders"
	"github.com/lockstep-sched/lockstep/test/lib/cluster"
	"github.com/lockstep-sched/lockstep/test/lib/thirdparty"
)

// The Prometheus Operator release whose CRDs the chart's ServiceMonitor and PrometheusRule are
// applied against, fetched from the module proxy like the other projects' CRDs (thirdparty).
const (
	prometheusOperatorModule  = "github.com/prometheus-operator/prometheus-operator"
	prometheusOperatorVersion = "v0.81.0"
)

var prometheusOperatorCRDs = []string{
	"example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml",
	"example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml",
}

// monitoringOn turns every monitoring part of the chart on.
const monitoringOn = "monitoring.enabled=true,monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true"

// TestObservability checks what the chart ships for Prometheus and Grafana against a running
// lockstep: the chart renders nothing of it by default; with monitoring on, the metrics port,
// Service, NetworkPolicy rule, ServiceMonitor, PrometheusRule and dashboard are wired to each
// other and apply strictly to a real apiserver with the Prometheus Operator's CRDs; every alert
// expression and dashboard query parses with Prometheus' own PromQL parser; and every series they
// name is one lockstep serves on --metrics-listen once it has bound, preempted for and queued a
// gang, which is also when every vector of it has children. That listener serves /metrics alone.
func TestObservability(t *testing.T) {
	h := newHelmRunner(t)
	chart := filepath.Join(env.root, helmChartDir)
	// First, so that the suite's lockstep is restored after the scenario's own cleanup, which
	// reads /debug/gangs.
	metricsURL := restartWithMetricsListener(t)
	installCRDs(t) // Volcano's Queue, for the queue series
	s := newScenario(t, 1, 4)
	qs := &queueScenario{scenario: s, dyn: newApplier(t).dyn}
	t.Cleanup(qs.cleanup)
	rel := &helmRelease{ns: s.ns, name: s.ns, fullname: s.ns + "-lockstep"}

	t.Run("lint", func(t *testing.T) {
		h.run(t, "lint", "--strict", chart, "--set", monitoringOn)
		h.run(t, "lint", "--strict", chart, "--set", "monitoring.enabled=true")
	})
	t.Run("off by default", func(t *testing.T) {
		checkMonitoringOff(t, decodeYAMLDocs(t, h.run(t, "template", rel.name, chart, "--namespace", rel.ns)))
	})
	t.Run("parts need the metrics port", func(t *testing.T) {
		for _, part := range []string{"serviceMonitor", "prometheusRule", "dashboard"} {
			_, stderr, err := h.exec("template", rel.name, chart, "--set", "monitoring."+part+".enabled=true")
			require.Error(t, err, part)
			assert.Contains(t, stderr, "monitoring."+part+".enabled needs monitoring.enabled=true", part)
		}
	})
	t.Run("thresholds come from values", func(t *testing.T) { checkAlertThresholds(t, h, chart, rel) })

	objs := decodeYAMLDocs(t, h.run(t, "template", rel.name, chart, "--namespace", rel.ns, "--set", monitoringOn))
	m := readMonitoring(t, objs)
	t.Run("metrics port, Service and NetworkPolicy", func(t *testing.T) { checkMetricsEndpoint(t, h, chart, rel, m) })
	t.Run("ServiceMonitor", func(t *testing.T) { checkServiceMonitor(t, rel, m) })
	t.Run("alerts", func(t *testing.T) { checkAlerts(t, m) })
	t.Run("dashboard", func(t *testing.T) { checkDashboard(t, m) })
	t.Run("applied to the apiserver", func(t *testing.T) { applyMonitoring(t, s.ctx, h, chart, rel, m) })
	refs, uses := m.metricRefs(t, rel)
	require.NotEmpty(t, refs)

	driveMetricWork(t, qs)
	t.Run("metrics listener serves /metrics alone", func(t *testing.T) { checkMetricsListenerOnly(t, metricsURL, s.ns) })
	families := scrape(t, metricsURL+"/metrics")
	t.Run("every series the chart names is exported", func(t *testing.T) { checkRefsExported(t, refs, uses, families) })
	t.Run("same registry as the debug address", func(t *testing.T) {
		assert.Equal(t, familyNames(scrape(t, env.lockstep.DebugURL+"/metrics")), familyNames(families))
	})
	t.Run("docs name every lockstep series", func(t *testing.T) { checkDocsNameSeries(t, families) })
}

// restartWithMetricsListener restarts the suite's lockstep with --metrics-listen on a free
// loopback port and returns that address's URL. The restart resets counters, which no other test
// reads across tests.
func restartWithMetricsListener(t *testing.T) string {
	t.Helper()
	port, err := cluster.FreePort()
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	restartLockstepWith(t, "--metrics-listen", addr)
	return "http://" + addr
}

// restartLockstepWith restarts the suite's lockstep with extra flags after its own; the original
// command line is restored when the test ends.
func restartLockstepWith(t *testing.T, extra ...string) {
	t.Helper()
	orig := slices.Clone(env.lockstep.Args)
	env.lockstep.Kill()
	env.lockstep.Args = append(slices.Clone(orig), extra...)
	t.Cleanup(func() {
		env.lockstep.Kill()
		env.lockstep.Args = orig
		if err := env.lockstep.Start(context.Background()); err != nil {
			t.Errorf("restarting lockstep as the suite configured it: %v", err)
		}
	})
	require.NoError(t, env.lockstep.Start(context.Background()))
}

// checkMonitoringOff: the default render has no metrics port, flag, Service or NetworkPolicy rule,
// and none of the Prometheus Operator's or Grafana's objects.
func checkMonitoringOff(t *testing.T, objs []*unstructured.Unstructured) {
	for _, o := range objs {
		assert.NotEqual(t, "monitoring.coreos.com/v1", o.GetAPIVersion(), "%s %s", o.GetKind(), o.GetName())
		assert.NotContains(t, o.GetLabels(), "grafana_dashboard", "%s %s", o.GetKind(), o.GetName())
		assert.NotEqual(t, "Service", o.GetKind(), o.GetName())
	}
	m := readMonitoring(t, objs)
	require.NotNil(t, m.sidecar)
	assert.Empty(t, flagValue(m.sidecar.Args, "--metrics-listen"))
	for _, p := range m.sidecar.Ports {
		assert.NotEqual(t, "metrics", p.Name)
	}
	require.NotNil(t, m.netpol)
	require.Len(t, m.netpol.Spec.Ingress, 1, "only the TLS port and kube-scheduler's")
	assert.Nil(t, m.serviceMonitor)
	assert.Nil(t, m.rule)
	assert.Nil(t, m.dashboardCM)
}

// monitoring is the rendered objects the monitoring values touch, typed.
type monitoring struct {
	deployment     *appsv1.Deployment
	sidecar        *corev1.Container
	service        *corev1.Service
	netpol         *networkingv1.NetworkPolicy
	serviceMonitor *serviceMonitor
	rule           *prometheusRule
	dashboardCM    *corev1.ConfigMap
	dashboard      *grafanaDashboard
	// objs are the rendered objects above, unstructured, to apply.
	objs []*unstructured.Unstructured
}

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor the chart writes; it is
// decoded strictly, so a field the chart misspells fails here, and the apiserver checks the rest
// against the CRD.
type serviceMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Scheme        string `json:"scheme"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// prometheusRule is monitoring.coreos.com/v1 PrometheusRule as the chart writes it.
type prometheusRule struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Groups []struct {
			Name  string      `json:"name"`
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func (r *prometheusRule) alerts() []alertRule {
	var out []alertRule
	for _, g := range r.Spec.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// grafanaDashboard is the part of a Grafana dashboard's JSON model the checks read.
type grafanaDashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ X, Y, W, H int } `json:"gridPos"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func readMonitoring(t *testing.T, objs []*unstructured.Unstructured) *monitoring {
	t.Helper()
	m := &monitoring{}
	for _, o := range objs {
		switch {
		case o.GetKind() == "Deployment":
			m.deployment = &appsv1.Deployment{}
			fromUnstructured(t, o, m.deployment)
			for i := range m.deployment.Spec.Template.Spec.Containers {
				if c := &m.deployment.Spec.Template.Spec.Containers[i]; c.Name == "lockstep" {
					m.sidecar = c
				}
			}
		case o.GetKind() == "Service":
			m.service = &corev1.Service{}
			fromUnstructured(t, o, m.service)
			m.objs = append(m.objs, o)
		case o.GetKind() == "NetworkPolicy":
			m.netpol = &networkingv1.NetworkPolicy{}
			fromUnstructured(t, o, m.netpol)
			m.objs = append(m.objs, o)
		case o.GetKind() == "ServiceMonitor":
			m.serviceMonitor = &serviceMonitor{}
			decodeStrict(t, o, m.serviceMonitor)
			m.objs = append(m.objs, o)
		case o.GetKind() == "PrometheusRule":
			m.rule = &prometheusRule{}
			decodeStrict(t, o, m.rule)
			m.objs = append(m.objs, o)
		case o.GetKind() == "ConfigMap" && o.GetLabels()["grafana_dashboard"] != "":
			m.dashboardCM = &corev1.ConfigMap{}
			fromUnstructured(t, o, m.dashboardCM)
			m.dashboard = &grafanaDashboard{}
			raw := m.dashboardCM.Data["lockstep.json"]
			require.NoError(t, json.Unmarshal([]byte(raw), m.dashboard), "the dashboard must be JSON")
			m.objs = append(m.objs, o)
		}
	}
	return m
}

func fromUnstructured(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, into, true), "%s %s", o.GetKind(), o.GetName())
}

func decodeStrict(t *testing.T, o *unstructured.Unstructured, into any) {
	t.Helper()
	raw, err := json.Marshal(o.Object)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(into), "%s %s", o.GetKind(), o.GetName())
}

// checkMetricsEndpoint: lockstep listens where the container port, the Service and the
// NetworkPolicy say, on every interface (Prometheus scrapes the pod IP).
func checkMetricsEndpoint(t *testing.T, h *helmRunner, chart string, rel *helmRelease, m *monitoring) {
	require.NotNil(t, m.sidecar)
	require.Equal(t, "0.0.0.0:8890", flagValue(m.sidecar.Args, "--metrics-listen"))
	require.Equal(t, "127.0.0.1:8889", flagValue(m.sidecar.Args, "--debug-listen"), "/debug/gangs stays on loopback")
	assert.Equal(t, 8890, containerPort(t, m.sidecar, intstr.FromString("metrics")))

	svc := m.service
	require.NotNil(t, svc)
	assert.Equal(t, rel.fullname+"-metrics", svc.Name)
	assert.Equal(t, rel.ns, svc.Namespace)
	assert.True(t, k8slabels.SelectorFromSet(svc.Spec.Selector).Matches(k8slabels.Set(m.deployment.Spec.Template.Labels)),
		"the Service selects the scheduler pods: %v", svc.Spec.Selector)
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, "metrics", svc.Spec.Ports[0].Name)
	assert.Equal(t, 8890, containerPort(t, m.sidecar, svc.Spec.Ports[0].TargetPort))

	require.NotNil(t, m.netpol)
	require.Len(t, m.netpol.Spec.Ingress, 2)
	rule := m.netpol.Spec.Ingress[1]
	require.Len(t, rule.Ports, 1)
	assert.Equal(t, 8890, rule.Ports[0].Port.IntValue())
	assert.Empty(t, rule.From, "monitoring.from is empty by default: from anywhere")
	for _, p := range m.netpol.Spec.Ingress[0].Ports {
		assert.NotEqual(t, 8890, p.Port.IntValue(), "networkPolicy.from must not govern the metrics port")
	}

	// monitoring.from narrows that rule alone.
	objs := decodeYAMLDocs(t, h.run(t, "template", rel.name, chart, "--namespace", rel.ns, "--set", "monitoring.enabled=true",
		"--set-json", `monitoring.from=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]`))
	narrowed := readMonitoring(t, objs).netpol
	require.Len(t, narrowed.Spec.Ingress, 2)
	assert.Empty(t, narrowed.Spec.Ingress[0].From)
	require.Len(t, narrowed.Spec.Ingress[1].From, 1)
	assert.Equal(t, map[string]string{"kubernetes.io/metadata.name": "monitoring"}, narrowed.Spec.Ingress[1].From[0].NamespaceSelector.MatchLabels)
}

// checkServiceMonitor: it selects the metrics Service, and no other object of the chart, by its
// port's name; the scrape's job label is then the Service's name, which the alerts select on.
func checkServiceMonitor(t *testing.T, rel *helmRelease, m *monitoring) {
	sm := m.serviceMonitor
	require.NotNil(t, sm)
	assert.Equal(t, rel.ns, sm.Metadata.Namespace)
	assert.Equal(t, []string{rel.ns}, sm.Spec.NamespaceSelector.MatchNames)
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	require.NoError(t, err)
	assert.True(t, sel.Matches(k8slabels.Set(m.service.Labels)), "the ServiceMonitor selects the metrics Service")
	for _, o := range m.objs {
		if o.GetKind() != "Service" {
			continue
		}
		assert.Equal(t, m.service.Name, o.GetName(), "the chart's only Service is the metrics one")
	}
	require.Len(t, sm.Spec.Endpoints, 1)
	ep := sm.Spec.Endpoints[0]
	assert.Equal(t, m.service.Spec.Ports[0].Name, ep.Port)
	assert.Equal(t, "/metrics", ep.Path)
	assert.Equal(t, "http", ep.Scheme)
	for _, d := range []string{ep.Interval, ep.ScrapeTimeout} {
		_, err := model.ParseDuration(d)
		assert.NoError(t, err, d)
	}
}

// wantAlerts are the alerts docs/observability.md explains, one section each.
var wantAlerts = []string{"LockstepGangPartlyBound", "LockstepBindsFailing", "LockstepNotLeading", "LockstepReservationsExpiring", "LockstepConditionWritesDropped"}

// checkAlerts: every alert a person is paged with says what happened and what to do, and links
// the section of docs/observability.md about it.
func checkAlerts(t *testing.T, m *monitoring) {
	require.NotNil(t, m.rule)
	docs, err := os.ReadFile(filepath.Join(env.root, "docs/observability.md"))
	require.NoError(t, err)
	var names []string
	for _, a := range m.rule.alerts() {
		names = append(names, a.Alert)
		assert.Contains(t, []string{"critical", "warning", "info"}, a.Labels["severity"], a.Alert)
		for _, key := range []string{"summary", "description", "runbook_url"} {
			assert.NotEmpty(t, strings.TrimSpace(a.Annotations[key]), "%s: annotation %s", a.Alert, key)
		}
		assert.Greater(t, len(a.Annotations["description"]), 200, "%s: a description a person can act on", a.Alert)
		anchor := strings.ToLower(a.Alert)
		assert.True(t, strings.HasSuffix(a.Annotations["runbook_url"], "docs/observability.md#"+anchor), a.Alert)
		assert.Contains(t, string(docs), "\n### "+a.Alert+"\n", "docs/observability.md has a section for %s", a.Alert)
		if a.For != "" {
			_, err := model.ParseDuration(a.For)
			assert.NoError(t, err, "%s: for %q", a.Alert, a.For)
		}
		_, err := parser.ParseExpr(a.Expr)
		assert.NoError(t, err, "%s: %s", a.Alert, a.Expr)
	}
	assert.ElementsMatch(t, wantAlerts, names)
}

// checkAlertThresholds: the thresholds and durations are values, and a partly-bound threshold that
// is not one of the histogram's bucket bounds is refused (its le matcher would match nothing).
func checkAlertThresholds(t *testing.T, h *helmRunner, chart string, rel *helmRelease) {
	set := strings.Join([]string{monitoringOn,
		"monitoring.prometheusRule.partlyBound.thresholdSeconds=10", "monitoring.prometheusRule.partlyBound.window=30m",
		"monitoring.prometheusRule.bindFailures.ratio=0.25", "monitoring.prometheusRule.bindFailures.for=20m",
		"monitoring.prometheusRule.notLeading.for=3m", "monitoring.prometheusRule.reservationExpiries.perHour=12",
		"monitoring.prometheusRule.conditionWritesDropped.for=7m", "monitoring.prometheusRule.alertLabels.team=ml",
		"monitoring.prometheusRule.seriesSelector=job=\"custom\""}, ",")
	m := readMonitoring(t, decodeYAMLDocs(t, h.run(t, "template", rel.name, chart, "--namespace", rel.ns, "--set", set)))
	byName := map[string]alertRule{}
	for _, a := range m.rule.alerts() {
		byName[a.Alert] = a
		assert.Equal(t, "ml", a.Labels["team"], a.Alert)
		for _, vs := range vectorSelectors(t, a.Expr) {
			assert.Contains(t, matcherValues(vs), `job="custom"`, "%s selects with seriesSelector", a.Alert)
		}
	}
	assert.Contains(t, byName["LockstepGangPartlyBound"].Expr, `le="10"`)
	assert.Contains(t, byName["LockstepGangPartlyBound"].Expr, "[30m]")
	assert.Contains(t, byName["LockstepBindsFailing"].Expr, "> 0.25")
	assert.Equal(t, "20m", byName["LockstepBindsFailing"].For)
	assert.Equal(t, "3m", byName["LockstepNotLeading"].For)
	assert.Contains(t, byName["LockstepReservationsExpiring"].Expr, "> 12")
	assert.Equal(t, "7m", byName["LockstepConditionWritesDropped"].For)

	_, stderr, err := h.exec("template", rel.name, chart, "--set", monitoringOn+",monitoring.prometheusRule.partlyBound.thresholdSeconds=7")
	require.Error(t, err)
	assert.Contains(t, stderr, "is not a bucket bound of lockstep_gang_partly_bound_seconds")
}

// dashboardVars are the values a Grafana variable stands for when the dashboard's queries are
// parsed: PromQL has no $variables, and $__rate_interval is Grafana's own.
func dashboardVars(rel *helmRelease) *strings.Replacer {
	return strings.NewReplacer("$__rate_interval", "2m", "$namespace", rel.ns, "$job", rel.fullname+"-metrics", "$resource", "nvidia.com/gpu")
}

// wantPanels are the dashboard's panels docs/observability.md describes, by title.
var wantPanels = []string{"Gangs by phase", "Gang wait", "Commit window", "Partly-bound window", "Extender verb latency",
	"Extender calls by verb and code", "Binds by kind and result", "Reservations expired and yielded", "Preemption evictions",
	"Pod condition writes dropped", "Queue usage: allocated and deserved ($resource)", "Gangs waiting per queue"}

// checkDashboard: the ConfigMap is one Grafana's sidecar loads, every query parses, and the panels
// neither overlap nor lack a data source.
func checkDashboard(t *testing.T, m *monitoring) {
	require.NotNil(t, m.dashboardCM)
	assert.Equal(t, "1", m.dashboardCM.Labels["grafana_dashboard"])
	d := m.dashboard
	assert.Equal(t, "lockstep", d.UID)
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	assert.ElementsMatch(t, []string{"datasource", "namespace", "job", "resource"}, vars)
	var titles []string
	type cell struct{ x, y int }
	taken := map[cell]string{}
	for _, p := range d.Panels {
		titles = append(titles, p.Title)
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("panels %q and %q overlap at %d,%d", other, p.Title, x, y)
				}
				taken[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		require.NotNil(t, p.Datasource, p.Title)
		assert.Equal(t, "${datasource}", p.Datasource.UID, p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
	}
	assert.Subset(t, titles, wantPanels)
}

// applyMonitoring server-side applies the rendered monitoring objects to the suite's apiserver
// with strict field validation, the ServiceMonitor and PrometheusRule against the Prometheus
// Operator's CRDs, and installs the chart with everything on as a server-side dry run, which
// renders NOTES.txt.
func applyMonitoring(t *testing.T, ctx context.Context, h *helmRunner, chart string, rel *helmRelease, m *monitoring) {
	dir, err := thirdparty.ModuleDir(ctx, prometheusOperatorModule, prometheusOperatorVersion)
	require.NoError(t, err)
	var paths []string
	for _, f := range prometheusOperatorCRDs {
		paths = append(paths, filepath.Join(dir, f))
	}
	require.NoError(t, thirdparty.InstallCRDs(ctx, env.cluster.RESTConfig, paths...))
	newApplier(t).applyAll(t, ctx, m.objs)

	out := h.run(t, "install", rel.name+"-dry", chart, "--namespace", rel.ns, "--set", monitoringOn,
		"--dry-run=server", "--kubeconfig", env.cluster.AdminKubeconfig)
	_, notes, ok := strings.Cut(out, "\nNOTES:\n")
	require.True(t, ok, "no NOTES in:\n%s", out)
	assert.Contains(t, notes, "on port 8890 of Service "+rel.name+"-dry-lockstep-metrics (ServiceMonitor "+rel.name+"-dry-lockstep).")
	assert.Contains(t, notes, "Alerts: PrometheusRule "+rel.name+"-dry-lockstep.")
	assert.Contains(t, notes, "Grafana dashboard: ConfigMap "+rel.name+"-dry-lockstep-dashboard.")
}

// metricRef is a series an alert or a dashboard query selects.
type metricRef struct {
	name  string
	where string
	// le is the bucket bound a _bucket selector matches exactly, if any.
	le string
	// matchers are the label names it matches on, besides the target's and le.
	matchers []string
}

// labelUse is a label an aggregation groups by, or a binary operation matches on, over the
// series of its operands: one of them at least must have it.
type labelUse struct {
	label string
	among []string
	where string
}

// targetLabels are the labels Prometheus adds to a scrape, which lockstep's output cannot show.
var targetLabels = []string{"job", "namespace", "instance", "pod", "service", "endpoint", "container"}

// metricRefs parses every alert expression, dashboard query and dashboard variable query with
// Prometheus' parser and lists the series they select, checking on the way that each selects
// this release's series (job and namespace).
func (m *monitoring) metricRefs(t *testing.T, rel *helmRelease) ([]metricRef, []labelUse) {
	t.Helper()
	var refs []metricRef
	var uses []labelUse
	add := func(expr, where string) {
		r, u := exprRefs(t, expr, where, rel)
		refs, uses = append(refs, r...), append(uses, u...)
	}
	for _, a := range m.rule.alerts() {
		add(a.Expr, "alert "+a.Alert)
	}
	vars := dashboardVars(rel)
	for _, p := range m.dashboard.Panels {
		for _, target := range p.Targets {
			expr := vars.Replace(target.Expr)
			require.NotContains(t, expr, "$", "panel %q uses a variable the dashboard does not define: %s", p.Title, target.Expr)
			add(expr, "panel "+p.Title)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+), *([a-z_]+)\)$`)
	for _, v := range m.dashboard.Templating.List {
		if v.Type != "query" {
			continue
		}
		match := labelValues.FindStringSubmatch(v.Definition)
		require.NotNil(t, match, "variable %s: %s", v.Name, v.Definition)
		where := "variable " + v.Name
		for _, vs := range vectorSelectors(t, vars.Replace(match[1])) {
			refs = append(refs, selectorRef(vs, where))
			uses = append(uses, labelUse{label: match[2], among: []string{vs.Name}, where: where})
		}
	}
	return refs, uses
}

// exprRefs lists what one expression selects, and the labels it groups and matches on; every
// selector must name its metric and pick this release's series.
func exprRefs(t *testing.T, expr, where string, rel *helmRelease) ([]metricRef, []labelUse) {
	t.Helper()
	e, err := parser.ParseExpr(expr)
	require.NoError(t, err, "%s: %s", where, expr)
	var uses []labelUse
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		var among []string
		for _, vs := range selectorsIn(n) {
			among = append(among, vs.Name)
		}
		for _, l := range groupingOf(n) {
			uses = append(uses, labelUse{label: l, among: among, where: where})
		}
		return nil
	})
	var refs []metricRef
	for _, vs := range selectorsIn(e) {
		require.NotEmpty(t, vs.Name, "%s: a selector names no metric: %s", where, expr)
		values := matcherValues(vs)
		assert.Contains(t, values, fmt.Sprintf("job=%q", rel.fullname+"-metrics"), "%s: %s", where, vs)
		assert.Contains(t, values, fmt.Sprintf("namespace=%q", rel.ns), "%s: %s", where, vs)
		refs = append(refs, selectorRef(vs, where))
	}
	return refs, uses
}

// groupingOf is the label names an aggregation groups by or a binary operation matches on.
func groupingOf(n parser.Node) []string {
	switch n := n.(type) {
	case *parser.AggregateExpr:
		return n.Grouping
	case *parser.BinaryExpr:
		if n.VectorMatching != nil {
			return append(slices.Clone(n.VectorMatching.MatchingLabels), n.VectorMatching.Include...)
		}
	}
	return nil
}

func selectorRef(vs *parser.VectorSelector, where string) metricRef {
	ref := metricRef{name: vs.Name, where: where}
	for _, m := range vs.LabelMatchers {
		switch {
		case m.Name == labels.MetricName || slices.Contains(targetLabels, m.Name):
		case m.Name == "le" && m.Type == labels.MatchEqual:
			ref.le = m.Value
		default:
			ref.matchers = append(ref.matchers, m.Name)
		}
	}
	return ref
}

func vectorSelectors(t *testing.T, expr string) []*parser.VectorSelector {
	t.Helper()
	e, err := parser.ParseExpr(expr)
	require.NoError(t, err, expr)
	return selectorsIn(e)
}

// selectorsIn lists the vector selectors of an expression tree; nil, which the parser's walk
// visits after each node's children, has none.
func selectorsIn(n parser.Node) []*parser.VectorSelector {
	if n == nil {
		return nil
	}
	var out []*parser.VectorSelector
	parser.Inspect(n, func(inner parser.Node, _ []parser.Node) error {
		if vs, ok := inner.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out
}

func matcherValues(vs *parser.VectorSelector) []string {
	var out []string
	for _, m := range vs.LabelMatchers {
		out = append(out, m.String())
	}
	return out
}

// driveMetricWork makes lockstep do what gives each of its vectors a child: a Volcano Queue (the
// queue series), a low-priority gang bound whole (binds, commit, partly-bound and wait
// histograms, every verb), then a high-priority gang that evicts it to bind (evictions).
func driveMetricWork(t *testing.T, qs *queueScenario) {
	t.Helper()
	qs.createVolcanoQueue(builders.VolcanoQueue(qs.queueName("observed")))
	qs.fillWithLowPriority(4)
	kubelet := qs.playKubelet()
	for i := range 2 {
		qs.create(qs.withPriority(podSpec{name: fmt.Sprintf("urgent-%d", i), gpus: 2, gang: "urgent", minAvailable: 2}.pod(), "e2e-high"))
	}
	qs.eventually(90*time.Second, "the urgent gang bound whole after evicting the low one", func() bool { return qs.boundIn("urgent-") == 2 })
	require.NotEmpty(t, kubelet(), "lockstep evicted the low-priority gang")
}

// checkMetricsListenerOnly: the address opened to the monitoring namespace answers /metrics and
// refuses everything of the debug address.
func checkMetricsListenerOnly(t *testing.T, base, ns string) {
	code, body := httpGet(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "lockstep_leading 1")
	for _, path := range []string{"/debug/gangs", "/debug/gangs?namespace=" + ns, "/debug/nodes", "/debug/queues", "/debug/pprof/", "/healthz", "/readyz"} {
		code, body := httpGet(t, base+path)
		assert.Equal(t, http.StatusNotFound, code, path)
		assert.Contains(t, body, "this address serves GET /metrics", path)
		assert.NotContains(t, body, "urgent", path)
	}
	// The debug address still serves what it did.
	code, body = httpGet(t, env.lockstep.DebugURL+"/debug/gangs")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "urgent")
}

func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func scrape(t *testing.T, u string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, u)
	require.Equal(t, http.StatusOK, code, u)
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err, u)
	return families
}

func familyNames(families map[string]*dto.MetricFamily) []string {
	out := make([]string, 0, len(families))
	for name := range families {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// histogramSuffixes are the series a histogram is written as; a reference to one maps to the
// histogram's own name.
var histogramSuffixes = []string{"_bucket", "_sum", "_count"}

// checkRefsExported: every series the chart names is in the scrape (a histogram's parts in the
// histogram), with the labels the expressions match and group on, and an le an alert matches is
// one of the histogram's bucket bounds.
func checkRefsExported(t *testing.T, refs []metricRef, uses []labelUse, families map[string]*dto.MetricFamily) {
	for _, ref := range refs {
		f, part := exported(families, ref.name)
		if !assert.NotNil(t, f, "%s names %s, which lockstep does not export", ref.where, ref.name) {
			continue
		}
		have := seriesLabels(f, part)
		for _, l := range ref.matchers {
			assert.Contains(t, have, l, "%s matches label %s, which %s does not have", ref.where, l, ref.name)
		}
		if ref.le != "" {
			assert.Equal(t, "_bucket", part, "%s matches le on %s", ref.where, ref.name)
			assert.Contains(t, bucketBounds(f), ref.le, "%s: le=%q is not a bucket bound of %s", ref.where, ref.le, f.GetName())
		}
	}
	for _, u := range uses {
		if slices.Contains(targetLabels, u.label) {
			continue
		}
		found := false
		for _, name := range u.among {
			if f, part := exported(families, name); f != nil && slices.Contains(seriesLabels(f, part), u.label) {
				found = true
			}
		}
		assert.True(t, found, "%s groups or matches on label %s, which none of %v has", u.where, u.label, u.among)
	}
}

// exported finds the family of a series name, and which part of a histogram it is ("" for the
// family itself).
func exported(families map[string]*dto.MetricFamily, name string) (*dto.MetricFamily, string) {
	if f := families[name]; f != nil {
		return f, ""
	}
	for _, suffix := range histogramSuffixes {
		if base, ok := strings.CutSuffix(name, suffix); ok && families[base].GetType() == dto.MetricType_HISTOGRAM {
			return families[base], suffix
		}
	}
	return nil, ""
}

// seriesLabels are the label names of a family's series, le included for a histogram's buckets.
func seriesLabels(f *dto.MetricFamily, part string) []string {
	var out []string
	if part == "_bucket" {
		out = append(out, "le")
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if !slices.Contains(out, l.GetName()) {
				out = append(out, l.GetName())
			}
		}
	}
	return out
}

// bucketBounds are a histogram's upper bounds as Prometheus writes them in le.
func bucketBounds(f *dto.MetricFamily) []string {
	var out []string
	for _, m := range f.GetMetric() {
		for _, b := range m.GetHistogram().GetBucket() {
			out = append(out, strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
		}
	}
	return out
}

// checkDocsNameSeries: docs/observability.md, which says what the metrics reveal, names every
// series lockstep exports.
func checkDocsNameSeries(t *testing.T, families map[string]*dto.MetricFamily) {
	docs, err := os.ReadFile(filepath.Join(env.root, "docs/observability.md"))
	require.NoError(t, err)
	for name := range families {
		if strings.HasPrefix(name, "lockstep_") {
			assert.Contains(t, string(docs), "`"+name, "docs/observability.md does not name %s", name)
		}
	}
}
