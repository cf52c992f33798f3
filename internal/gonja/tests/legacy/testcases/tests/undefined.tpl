{{ not_found is undefined }}
{{ not_found is not undefined }}
{{ simple is undefined }}
{{ simple is not undefined }}
{{ simple.str is undefined }}
{{ simple.str is not undefined }}
{{ simple.missing is undefined }}
{{ simple.missing is not undefined }}
