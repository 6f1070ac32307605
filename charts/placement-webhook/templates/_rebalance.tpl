{{/* Names, labels and checks of the rebalancer (`placement-webhook rebalance`, rebalance.enabled;
docs/rebalance.md). */}}

{{/* <fullname>-rebalance: the rebalancer's objects and its Lease. The full name is cut first so
the suffix always survives the 63-character limit. */}}
{{- define "placement-webhook.rebalance.fullname" -}}
{{- printf "%s-rebalance" (include "placement-webhook.fullname" . | trunc 53 | trimSuffix "-") -}}
{{- end -}}

{{/* The Lease the replicas elect the acting one on (--lease-name): get/update are granted on it alone. */}}
{{- define "placement-webhook.rebalance.leaseName" -}}
{{- include "placement-webhook.rebalance.fullname" . -}}
{{- end -}}

{{/* Immutable selector labels, apart from every other workload's of the chart. */}}
{{- define "placement-webhook.rebalance.selectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-rebalance" (include "placement-webhook.name" . | trunc 53 | trimSuffix "-") }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "placement-webhook.rebalance.labels" -}}
helm.sh/chart: {{ include "placement-webhook.chart" . }}
{{ include "placement-webhook.rebalance.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: rebalance
app.kubernetes.io/part-of: {{ include "placement-webhook.name" . }}
{{- end -}}

{{- define "placement-webhook.rebalance.serviceAccountName" -}}
{{- if .Values.rebalance.serviceAccount.create -}}
{{- default (include "placement-webhook.rebalance.fullname" .) .Values.rebalance.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.rebalance.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The mounted SpotConfig the container is pointed at (--config). */}}
{{- define "placement-webhook.rebalance.configDir" -}}/etc/placement-rebalance{{- end -}}
{{- define "placement-webhook.rebalance.configFile" -}}/etc/placement-rebalance/config.yaml{{- end -}}

{{/* The SpotConfig file from rebalance.config, apiVersion and kind filled in when left out. */}}
{{- define "placement-webhook.rebalance.config" -}}
{{- $defaults := dict "apiVersion" "placement.novasphere.dev/v1alpha1" "kind" "SpotConfig" -}}
{{- merge (deepCopy .Values.rebalance.config) $defaults | toYaml -}}
{{- end -}}

{{/* --interval: a number is seconds, a string a duration (60s, 5m, 1m30s) as given. */}}
{{- define "placement-webhook.rebalance.interval" -}}
{{- if kindIs "string" .Values.rebalance.interval -}}{{ .Values.rebalance.interval }}{{- else -}}{{ include "placement-webhook.labeler.number" .Values.rebalance.interval }}{{- end -}}
{{- end -}}

{{/* The leader-election timings `rebalance` refuses at start (client-go's NewLeaderElector):
fail the render instead of installing a pod that crash-loops. */}}
{{- define "placement-webhook.rebalance.validate" -}}
{{- $election := .Values.rebalance.leaderElection -}}
{{- $duration := float64 $election.leaseDurationSeconds -}}
{{- $deadline := float64 $election.renewDeadlineSeconds -}}
{{- $retry := float64 $election.retryPeriodSeconds -}}
{{- if le $duration $deadline -}}
{{- fail (printf "rebalance.leaderElection.leaseDurationSeconds (%v) must be greater than renewDeadlineSeconds (%v)" $election.leaseDurationSeconds $election.renewDeadlineSeconds) -}}
{{- end -}}
{{- if le $deadline (mulf 1.2 $retry) -}}
{{- fail (printf "rebalance.leaderElection.renewDeadlineSeconds (%v) must be greater than 1.2 x retryPeriodSeconds (%v)" $election.renewDeadlineSeconds $election.retryPeriodSeconds) -}}
{{- end -}}
{{- end -}}
