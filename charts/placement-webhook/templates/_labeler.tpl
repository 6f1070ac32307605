{{/* Names, labels and checks of the node labeler (`placement-webhook label-nodes`, labeler.enabled). */}}

{{/* <fullname>-label-nodes: the labeler's objects and its Lease. The full name is cut first so the
suffix always survives the 63-character limit. */}}
{{- define "placement-webhook.labeler.fullname" -}}
{{- printf "%s-label-nodes" (include "placement-webhook.fullname" . | trunc 51 | trimSuffix "-") -}}
{{- end -}}

{{/* The Lease the replicas elect a writer on (--lease-name): get/update are granted on it alone. */}}
{{- define "placement-webhook.labeler.leaseName" -}}
{{- include "placement-webhook.labeler.fullname" . -}}
{{- end -}}

{{/* Immutable selector labels. The name differs from the webhook's, so that neither the webhook's
Service, Deployment and PodDisruptionBudget (which select on name and instance only) nor the
labeler's select the other's pods. */}}
{{- define "placement-webhook.labeler.selectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-label-nodes" (include "placement-webhook.name" . | trunc 51 | trimSuffix "-") }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "placement-webhook.labeler.labels" -}}
helm.sh/chart: {{ include "placement-webhook.chart" . }}
{{ include "placement-webhook.labeler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: label-nodes
app.kubernetes.io/part-of: {{ include "placement-webhook.name" . }}
{{- end -}}

{{- define "placement-webhook.labeler.serviceAccountName" -}}
{{- if .Values.labeler.serviceAccount.create -}}
{{- default (include "placement-webhook.labeler.fullname" .) .Values.labeler.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.labeler.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* A number as a command-line value: whole numbers without a decimal point or an exponent. */}}
{{- define "placement-webhook.labeler.number" -}}
{{- if eq (float64 .) (float64 (int64 .)) -}}{{ int64 . }}{{- else -}}{{ . }}{{- end -}}
{{- end -}}

{{/* The leader-election timings `label-nodes` refuses at start (client-go's NewLeaderElector):
fail the render instead of installing a pod that crash-loops. */}}
{{- define "placement-webhook.labeler.validate" -}}
{{- $election := .Values.labeler.leaderElection -}}
{{- $duration := float64 $election.leaseDurationSeconds -}}
{{- $deadline := float64 $election.renewDeadlineSeconds -}}
{{- $retry := float64 $election.retryPeriodSeconds -}}
{{- if le $duration $deadline -}}
{{- fail (printf "labeler.leaderElection.leaseDurationSeconds (%v) must be greater than renewDeadlineSeconds (%v)" $election.leaseDurationSeconds $election.renewDeadlineSeconds) -}}
{{- end -}}
{{- if le $deadline (mulf 1.2 $retry) -}}
{{- fail (printf "labeler.leaderElection.renewDeadlineSeconds (%v) must be greater than 1.2 x retryPeriodSeconds (%v)" $election.renewDeadlineSeconds $election.retryPeriodSeconds) -}}
{{- end -}}
{{- end -}}
