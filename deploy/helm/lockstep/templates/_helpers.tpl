{{/* The chart name, or nameOverride. */}}
{{- define "lockstep.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's object name: <release>-<chart>, or the release name alone when it already holds the
chart name, or fullnameOverride. Cluster-scoped objects are named after it too, so they never clash
with deploy/manifests' (lockstep-extender, lockstep-bindings, ...) unless the release is itself
called "lockstep". Kept to 52 characters so that suffixed names ("-gpu-agent", ":kube-scheduler")
stay within 63.
*/}}
{{- define "lockstep.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "lockstep.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object; pass (dict "ctx" $ "component" "scheduler"). */}}
{{- define "lockstep.labels" -}}
helm.sh/chart: {{ include "lockstep.chart" .ctx }}
{{ include "lockstep.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: lockstep
{{- end }}

{{/* Selector labels; pass (dict "ctx" $ "component" "scheduler"). */}}
{{- define "lockstep.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lockstep.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The scheduler pod's ServiceAccount: kube-scheduler and its lockstep sidecar share it. */}}
{{- define "lockstep.serviceAccountName" -}}
{{- include "lockstep.fullname" . }}
{{- end }}

{{/* The gpu-agent's ServiceAccount. */}}
{{- define "lockstep.gpuAgentName" -}}
{{- printf "%s-gpu-agent" (include "lockstep.fullname" .) }}
{{- end }}

{{/* The leader-election Lease, in the release namespace. */}}
{{- define "lockstep.leaseName" -}}
{{- include "lockstep.fullname" . }}
{{- end }}

{{- define "lockstep.image" -}}
{{- printf "%s:%s" .Values.lockstep.image.repository (default .Chart.AppVersion .Values.lockstep.image.tag) }}
{{- end }}

{{- define "lockstep.gpuAgentImage" -}}
{{- printf "%s:%s" (default .Values.lockstep.image.repository .Values.gpuAgent.image.repository) (default (default .Chart.AppVersion .Values.lockstep.image.tag) .Values.gpuAgent.image.tag) }}
{{- end }}

{{/* True (non-empty) when the chart generates the TLS Secrets; fails on half a configuration. */}}
{{- define "lockstep.tls.generate" -}}
{{- $server := .Values.tls.serverSecret }}
{{- $client := .Values.tls.clientSecret }}
{{- if and $server $client }}
{{- else if or $server $client }}
{{- fail "tls.serverSecret and tls.clientSecret go together: name both existing Secrets, or neither to have the chart generate them" }}
{{- else }}true{{- end }}
{{- end }}

{{/* lockstep's serving certificate: tls.crt, tls.key, ca.crt (the CA of accepted clients). */}}
{{- define "lockstep.tls.serverSecretName" -}}
{{- default (printf "%s-server-tls" (include "lockstep.fullname" .)) .Values.tls.serverSecret }}
{{- end }}

{{/* kube-scheduler's client certificate: tls.crt, tls.key, ca.crt (the CA of lockstep's). */}}
{{- define "lockstep.tls.clientSecretName" -}}
{{- default (printf "%s-client-tls" (include "lockstep.fullname" .)) .Values.tls.clientSecret }}
{{- end }}

{{/* Where the containers find their files (a projected volume each, mounted at this directory). */}}
{{- define "lockstep.configDir" -}}/etc/lockstep{{- end }}

{{/*
Fails when a monitoring part that reads lockstep's metrics is enabled without the metrics port;
pass (dict "ctx" $ "what" "monitoring.serviceMonitor.enabled").
*/}}
{{- define "lockstep.monitoring.require" -}}
{{- if not .ctx.Values.monitoring.enabled }}
{{- fail (printf "%s needs monitoring.enabled=true: without it lockstep serves no /metrics that Prometheus can reach" .what) }}
{{- end }}
{{- end }}

{{/* The metrics Service, whose name the ServiceMonitor's scrape gives as the job label. */}}
{{- define "lockstep.metricsServiceName" -}}
{{- printf "%s-metrics" (include "lockstep.fullname" .) }}
{{- end }}

{{/* Label matchers of this release's series in the alerts' expressions. */}}
{{- define "lockstep.monitoring.selector" -}}
{{- default (printf "job=%q,namespace=%q" (include "lockstep.metricsServiceName" .) .Release.Namespace) .Values.monitoring.prometheusRule.seriesSelector }}
{{- end }}
