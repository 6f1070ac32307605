{{/* Names, labels and shared fragments of the placement-webhook chart. */}}

{{- define "placement-webhook.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name, used for every object and as the Service name in certificates. */}}
{{- define "placement-webhook.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "placement-webhook.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Immutable selector labels: never add a label here that changes between releases. */}}
{{- define "placement-webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "placement-webhook.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "placement-webhook.labels" -}}
helm.sh/chart: {{ include "placement-webhook.chart" . }}
{{ include "placement-webhook.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: admission-webhook
{{- end -}}

{{- define "placement-webhook.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "placement-webhook.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "placement-webhook.image" -}}
{{- $repo := .Values.image.repository -}}
{{- if .Values.image.registry -}}{{- $repo = printf "%s/%s" .Values.image.registry $repo -}}{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The Secret the server reads its serving certificate from. */}}
{{- define "placement-webhook.tlsSecretName" -}}
{{- if eq .Values.tls.mode "secret" -}}
{{- required "tls.secretName is required with tls.mode=secret" .Values.tls.secretName -}}
{{- else -}}
{{- printf "%s-tls" (include "placement-webhook.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "placement-webhook.policiesConfigMapName" -}}
{{- default (printf "%s-policies" (include "placement-webhook.fullname" .)) .Values.policies.existingConfigMap -}}
{{- end -}}

{{/* Whether the server reads policies from files (the ConfigMap) and from the cluster's PlacementPolicy objects: "true" or "". */}}
{{- define "placement-webhook.policiesFromFiles" -}}
{{- if has "files" (splitList "," .Values.policies.from) -}}true{{- end -}}
{{- end -}}

{{- define "placement-webhook.policiesFromCluster" -}}
{{- if has "cluster" (splitList "," .Values.policies.from) -}}true{{- end -}}
{{- end -}}

{{/* The server talks to the API server (and needs its token) for the cluster view, for PlacementPolicy objects or for the background audit. */}}
{{- define "placement-webhook.readsCluster" -}}
{{- if or .Values.clusterView.enabled (include "placement-webhook.policiesFromCluster" .) .Values.audit.enabled -}}true{{- else -}}false{{- end -}}
{{- end -}}

{{/* The server stands for its Lease (one replica writes PlacementPolicy status and runs the audit): "true" or "". */}}
{{- define "placement-webhook.leads" -}}
{{- if or (include "placement-webhook.policiesFromCluster" .) .Values.audit.enabled -}}true{{- end -}}
{{- end -}}

{{/* DNS names the API server may use to reach the Service (it uses <svc>.<ns>.svc). */}}
{{- define "placement-webhook.dnsNames" -}}
{{- $svc := include "placement-webhook.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) | toJson -}}
{{- end -}}

{{/* Stop the render early on combinations that would install a webhook nobody can call. */}}
{{- define "placement-webhook.validate" -}}
{{- if and .Values.webhook.url (ne .Values.tls.mode "secret") -}}
{{- fail "webhook.url calls a server outside the cluster: set tls.mode=secret and tls.caBundle to the CA that signed its certificate" -}}
{{- end -}}
{{- if and (eq .Values.tls.mode "secret") (not .Values.tls.caBundle) -}}
{{- fail "tls.caBundle is required with tls.mode=secret (base64 PEM of the CA that signed the serving certificate)" -}}
{{- end -}}
{{- if and (not (include "placement-webhook.policiesFromFiles" .)) (or .Values.policies.items .Values.policies.existingConfigMap) -}}
{{- fail "policies.items and policies.existingConfigMap are read with policies.from files or files,cluster: with policies.from cluster, apply PlacementPolicy objects instead" -}}
{{- end -}}
{{- $needed := add .Values.server.preStopSeconds .Values.server.shutdownGraceSeconds -}}
{{- if le (int .Values.terminationGracePeriodSeconds) (int $needed) -}}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed server.preStopSeconds + server.shutdownGraceSeconds (%v), or in-flight reviews are killed" .Values.terminationGracePeriodSeconds $needed) -}}
{{- end -}}
{{- end -}}
