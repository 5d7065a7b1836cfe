package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const (
	sidecarConfig = "../../deploy/scheduler-config/lockstep-sidecar.yaml"
	profileConfig = "../../deploy/scheduler-config/lockstep-profile.yaml"
)

func TestValidateBindWaitAgainstSchedulerTimeout(t *testing.T) {
	writeConfig := func(t *testing.T, body string) string {
		path := filepath.Join(t.TempDir(), "scheduler.yaml")
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		return path
	}
	noTimeout := writeConfig(t, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nextenders:\n- urlPrefix: http://127.0.0.1:8888\n  bindVerb: bind\n")
	noBinder := writeConfig(t, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nextenders:\n- urlPrefix: http://127.0.0.1:8888\n  filterVerb: filter\n")
	typo := writeConfig(t, "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nextenderz: []\n")

	cases := []struct {
		name        string
		mutate      func(*options)
		wantTimeout time.Duration
		wantErr     string
	}{
		{name: "defaults fit kube-scheduler's 5s default", mutate: func(*options) {}, wantTimeout: 5 * time.Second},
		{name: "bind-wait too close to the timeout", mutate: func(o *options) { o.bindWait = 4500 * time.Millisecond }, wantErr: "--bind-wait=4.5s must be at most 4s"},
		{name: "shipped sidecar config with the shipped bind-wait", mutate: func(o *options) { o.schedulerConfig, o.bindWait = sidecarConfig, 25*time.Second }, wantTimeout: 30 * time.Second},
		{name: "shipped profile config with the shipped bind-wait", mutate: func(o *options) { o.schedulerConfig, o.bindWait = profileConfig, 25*time.Second }, wantTimeout: 30 * time.Second},
		{name: "shipped config read, bind-wait too long", mutate: func(o *options) { o.schedulerConfig, o.bindWait = sidecarConfig, 29500*time.Millisecond }, wantErr: "httpTimeout (30s)"},
		{name: "config without httpTimeout means the scheduler's 5s", mutate: func(o *options) { o.schedulerConfig, o.bindWait = noTimeout, 8*time.Second }, wantErr: "httpTimeout (5s)"},
		{name: "config where lockstep does not bind", mutate: func(o *options) { o.schedulerConfig = noBinder }, wantErr: "no extender with a bindVerb"},
		{name: "config with an unknown field", mutate: func(o *options) { o.schedulerConfig = typo }, wantErr: "extenderz"},
		{name: "missing config file", mutate: func(o *options) { o.schedulerConfig = "/nonexistent/scheduler.yaml" }, wantErr: "no such file"},
		{name: "non-positive waiting time", mutate: func(o *options) { o.defaultWaitingTime = 0 }, wantErr: "--default-waiting-time must be positive"},
		{name: "non-positive bind rate", mutate: func(o *options) { o.bindQPS = 0 }, wantErr: "--bind-qps and --bind-burst must be positive, got 0 and 1000"},
		{name: "non-positive events burst", mutate: func(o *options) { o.eventsBurst = 0 }, wantErr: "--events-qps and --events-burst must be positive"},
		{name: "non-positive body limit", mutate: func(o *options) { o.maxRequestBytes = -1 }, wantErr: "--max-request-bytes must be positive"},
		{name: "gather-wait off", mutate: func(o *options) { o.gatherWait = 0 }, wantTimeout: 5 * time.Second},
		{name: "gather-wait holding the scheduler too long", mutate: func(o *options) { o.gatherWait = 2 * time.Second }, wantErr: "--gather-wait must be between 0 and 1s, got 2s"},
		{name: "negative gather-wait", mutate: func(o *options) { o.gatherWait = -time.Millisecond }, wantErr: "--gather-wait must be between 0 and 1s"},
		{name: "verbs on every interface without client certificates", mutate: func(o *options) { o.listen = ":8888" }, wantErr: "--listen=:8888 is reachable from the network"},
		{name: "verbs on the network with TLS but no client CA", mutate: func(o *options) {
			o.listen, o.tlsCertFile, o.tlsKeyFile = "0.0.0.0:8443", "tls.crt", "tls.key"
		}, wantErr: "--client-ca-file"},
		{name: "verbs on the network over mutual TLS", mutate: func(o *options) {
			o.listen, o.tlsCertFile, o.tlsKeyFile, o.clientCAFile = "0.0.0.0:8443", "tls.crt", "tls.key", "ca.crt"
		}, wantTimeout: 5 * time.Second},
		{name: "unparsable listen address", mutate: func(o *options) { o.listen = "8888" }, wantErr: "--listen=8888"},
		{name: "debug on the network is allowed, with a warning", mutate: func(o *options) { o.debugListen = "0.0.0.0:8889" }, wantTimeout: 5 * time.Second},
		{name: "lease without a namespace", mutate: func(o *options) { o.leaderLease = "lockstep-scheduler" }, wantErr: "want NAMESPACE/NAME"},
		{name: "lease", mutate: func(o *options) { o.leaderLease = "lockstep-system/lockstep-scheduler" }, wantTimeout: 5 * time.Second},
		{name: "debug turned off", mutate: func(o *options) { o.debugListen = "" }, wantTimeout: 5 * time.Second},
		{name: "metrics on the network", mutate: func(o *options) { o.metricsListen = "0.0.0.0:8890" }, wantTimeout: 5 * time.Second},
		{name: "unparsable metrics address", mutate: func(o *options) { o.metricsListen = "8890" }, wantErr: "--metrics-listen=8890"},
		{name: "unparsable metrics address with debug off", mutate: func(o *options) { o.debugListen, o.metricsListen = "", "8890" }, wantErr: "--metrics-listen=8890"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultOptions()
			tc.mutate(&o)
			err := o.validate()
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantTimeout, o.httpTimeout)
		})
	}
}

// The second scheduler's ConfigMap must carry lockstep-profile.yaml unchanged, and the Deployment
// must run lockstep with flags that pass validation against it.
func TestShippedDeploymentMatchesSchedulerConfig(t *testing.T) {
	profile, err := os.ReadFile(profileConfig)
	require.NoError(t, err)
	raw, err := os.ReadFile("../../deploy/manifests/configmap.yaml")
	require.NoError(t, err)
	var cm corev1.ConfigMap
	require.NoError(t, yaml.Unmarshal(raw, &cm))
	require.Equal(t, string(profile), cm.Data["scheduler.yaml"], "deploy/manifests/configmap.yaml must hold lockstep-profile.yaml verbatim")

	raw, err = os.ReadFile("../../deploy/manifests/deployment.yaml")
	require.NoError(t, err)
	var deploy appsv1.Deployment
	require.NoError(t, yaml.Unmarshal([]byte(strings.SplitN(string(raw), "\n---", 2)[0]), &deploy))
	var lockstepArgs []string
	for _, c := range deploy.Spec.Template.Spec.Containers {
		if len(c.Args) > 0 && strings.HasPrefix(c.Image, "ghcr.io/lockstep-sched/") {
			lockstepArgs = c.Args
		}
	}
	require.NotEmpty(t, lockstepArgs, "the Deployment has a lockstep container")
	o := defaultOptions()
	fs := newFlagSet(&o)
	require.NoError(t, fs.Parse(lockstepArgs))
	require.Equal(t, "/etc/lockstep/scheduler.yaml", o.schedulerConfig)
	o.schedulerConfig = profileConfig // the file the ConfigMap mounts there
	require.NoError(t, o.validate())
}

// The shipped configurations leave kube-scheduler's own gang plugin off in every profile; a
// configuration that does not is named, profile by profile, for the start-up warning.
func TestProfilesWithGangPlugin(t *testing.T) {
	for _, shipped := range []string{sidecarConfig, profileConfig} {
		cfg, err := readSchedulerConfig(shipped)
		require.NoError(t, err)
		require.Empty(t, profilesWithGangPlugin(cfg), shipped)
	}
	cfg, err := readSchedulerConfig(sidecarConfig)
	require.NoError(t, err)
	cfg.Profiles[1].Plugins = nil
	cfg.Profiles[2].Plugins.MultiPoint.Disabled[0].Name = "*"
	require.Equal(t, []string{"volcano"}, profilesWithGangPlugin(cfg), "a profile disabling every plugin at multiPoint disables it too")
	cfg.Profiles = nil
	require.Equal(t, []string{"default-scheduler"}, profilesWithGangPlugin(cfg), "no profiles: kube-scheduler's default one")
}
