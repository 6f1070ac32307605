{{/* Names, labels and checks of the scheduler extender (`placement-webhook extender`, extender.enabled;
docs/extender.md). */}}

{{/* <fullname>-extender: the extender's objects. The full name is cut first so the suffix always
survives the 63-character limit. */}}
{{- define "placement-webhook.extender.fullname" -}}
{{- printf "%s-extender" (include "placement-webhook.fullname" . | trunc 54 | trimSuffix "-") -}}
{{- end -}}

{{/* Immutable selector labels. The name differs from the webhook's and the labeler's, so that no
other Service, Deployment or PodDisruptionBudget of the chart selects the extender's pods, nor
the extender's theirs. */}}
{{- define "placement-webhook.extender.selectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-extender" (include "placement-webhook.name" . | trunc 54 | trimSuffix "-") }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "placement-webhook.extender.labels" -}}
helm.sh/chart: {{ include "placement-webhook.chart" . }}
{{ include "placement-webhook.extender.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: scheduler-extender
app.kubernetes.io/part-of: {{ include "placement-webhook.name" . }}
{{- end -}}

{{- define "placement-webhook.extender.serviceAccountName" -}}
{{- if .Values.extender.serviceAccount.create -}}
{{- default (include "placement-webhook.extender.fullname" .) .Values.extender.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.extender.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the extender's serving certificate: extender.tls.secretName when given
(created by you), else <fullname>-extender-tls (generated in self-signed mode, issued by
cert-manager in cert-manager mode). tls.mode=secret has no way to make one: it needs the name. */}}
{{- define "placement-webhook.extender.tlsSecretName" -}}
{{- if .Values.extender.tls.secretName -}}
{{- .Values.extender.tls.secretName -}}
{{- else if eq .Values.tls.mode "secret" -}}
{{- fail "extender.tls.secretName is required with tls.mode=secret and extender.tls.enabled (a kubernetes.io/tls Secret for the extender Service's DNS names), or set extender.tls.enabled=false" -}}
{{- else -}}
{{- printf "%s-tls" (include "placement-webhook.extender.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* Whether the chart makes the extender's certificate (self-signed or cert-manager mode, no
extender.tls.secretName). */}}
{{- define "placement-webhook.extender.chartCertificate" -}}
{{- if and .Values.extender.tls.enabled (not .Values.extender.tls.secretName) (ne .Values.tls.mode "secret") -}}true{{- end -}}
{{- end -}}

{{/* DNS names the scheduler may use to reach the extender Service. */}}
{{- define "placement-webhook.extender.dnsNames" -}}
{{- $svc := include "placement-webhook.extender.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) | toJson -}}
{{- end -}}

{{/* IP addresses in the certificate: the Service's fixed clusterIP, when one is set. */}}
{{- define "placement-webhook.extender.ipAddresses" -}}
{{- $ips := list -}}
{{- with .Values.extender.service.clusterIP -}}{{- $ips = append $ips . -}}{{- end -}}
{{- $ips | toJson -}}
{{- end -}}

{{/* The base URL the scheduler calls, as `placement-webhook extender --print-scheduler-config` builds
it: https when TLS is on; the fixed clusterIP when one is set (kube-scheduler usually runs with
hostNetwork and cannot resolve cluster DNS names), else the Service's DNS name; then the urlPrefix. */}}
{{- define "placement-webhook.extender.url" -}}
{{- $e := .Values.extender -}}
{{- $host := default (printf "%s.%s.svc" (include "placement-webhook.extender.fullname" .) .Release.Namespace) $e.service.clusterIP -}}
{{- $prefix := trimAll "/" $e.urlPrefix -}}
{{- printf "%s://%s:%d" (ternary "https" "http" $e.tls.enabled) $host (int $e.service.port) -}}
{{- if $prefix -}}/{{ $prefix }}{{- end -}}
{{- end -}}

{{/* The mounted files the container is pointed at (one projected volume at /etc/placement-extender). */}}
{{- define "placement-webhook.extender.configFile" -}}/etc/placement-extender/config.yaml{{- end -}}
{{- define "placement-webhook.extender.certFile" -}}/etc/placement-extender/tls/tls.crt{{- end -}}
{{- define "placement-webhook.extender.keyFile" -}}/etc/placement-extender/tls/tls.key{{- end -}}

{{/* The SpotConfig file from extender.config, apiVersion and kind filled in when left out. */}}
{{- define "placement-webhook.extender.config" -}}
{{- $defaults := dict "apiVersion" "placement.novasphere.dev/v1alpha1" "kind" "SpotConfig" -}}
{{- merge (deepCopy .Values.extender.config) $defaults | toYaml -}}
{{- end -}}
