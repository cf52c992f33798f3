Bytes
{{ 1|filesizeformat }}
{{ 999|filesizeformat }}
{{ 1000|filesizeformat }}
{{ 1024|filesizeformat }}
{{ 1048576|filesizeformat }}
{{ 1073741824|filesizeformat }}

Binary
{{ 1|filesizeformat(true) }}
{{ 999|filesizeformat(true) }}
{{ 1000|filesizeformat(true) }}
{{ 1024|filesizeformat(true) }}
{{ 1048576|filesizeformat(true) }}
{{ 1073741824|filesizeformat(true) }}
