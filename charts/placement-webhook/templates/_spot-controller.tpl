{{/* Names, labels and checks of the spot controller (`placement-webhook spot-controller`,
spotController.enabled; docs/spot-controller.md). */}}

{{/* <fullname>-spot-controller: the controller's objects and its Lease. The full name is cut first
so the suffix always survives the 63-character limit. */}}
{{- define "placement-webhook.spotController.fullname" -}}
{{- printf "%s-spot-controller" (include "placement-webhook.fullname" . | trunc 47 | trimSuffix "-") -}}
{{- end -}}

{{/* The Lease the replicas elect the acting one on (--lease-name): get/update are granted on it alone. */}}
{{- define "placement-webhook.spotController.leaseName" -}}
{{- include "placement-webhook.spotController.fullname" . -}}
{{- end -}}

{{/* Immutable selector labels. The name differs from the webhook's, the labeler's and the
extender's, so that no other Service, Deployment or PodDisruptionBudget of the chart selects the
controller's pods, nor the controller's theirs. */}}
{{- define "placement-webhook.spotController.selectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-spot-controller" (include "placement-webhook.name" . | trunc 47 | trimSuffix "-") }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "placement-webhook.spotController.labels" -}}
helm.sh/chart: {{ include "placement-webhook.chart" . }}
{{ include "placement-webhook.spotController.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: spot-controller
app.kubernetes.io/part-of: {{ include "placement-webhook.name" . }}
{{- end -}}

{{- define "placement-webhook.spotController.serviceAccountName" -}}
{{- if .Values.spotController.serviceAccount.create -}}
{{- default (include "placement-webhook.spotController.fullname" .) .Values.spotController.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.spotController.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The mounted SpotConfig the container is pointed at (--config). */}}
{{- define "placement-webhook.spotController.configDir" -}}/etc/placement-spot{{- end -}}
{{- define "placement-webhook.spotController.configFile" -}}/etc/placement-spot/config.yaml{{- end -}}

{{/* The SpotConfig file from spotController.config, apiVersion and kind filled in when left out. */}}
{{- define "placement-webhook.spotController.config" -}}
{{- $defaults := dict "apiVersion" "placement.novasphere.dev/v1alpha1" "kind" "SpotConfig" -}}
{{- merge (deepCopy .Values.spotController.config) $defaults | toYaml -}}
{{- end -}}

{{/* The leader-election timings `spot-controller` refuses at start (client-go's NewLeaderElector):
fail the render instead of installing a pod that crash-loops. */}}
{{- define "placement-webhook.spotController.validate" -}}
{{- $election := .Values.spotController.leaderElection -}}
{{- $duration := float64 $election.leaseDurationSeconds -}}
{{- $deadline := float64 $election.renewDeadlineSeconds -}}
{{- $retry := float64 $election.retryPeriodSeconds -}}
{{- if le $duration $deadline -}}
{{- fail (printf "spotController.leaderElection.leaseDurationSeconds (%v) must be greater than renewDeadlineSeconds (%v)" $election.leaseDurationSeconds $election.renewDeadlineSeconds) -}}
{{- end -}}
{{- if le $deadline (mulf 1.2 $retry) -}}
{{- fail (printf "spotController.leaderElection.renewDeadlineSeconds (%v) must be greater than 1.2 x retryPeriodSeconds (%v)" $election.renewDeadlineSeconds $election.retryPeriodSeconds) -}}
{{- end -}}
{{- end -}}
