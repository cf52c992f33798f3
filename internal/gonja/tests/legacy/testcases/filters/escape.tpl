{{ "<script>"|escape }}
{{ "<script>"|e }}
{{ "<script>"|safe|escape }}
{{ "<script>"|safe|e }}
