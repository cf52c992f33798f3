{% filter upper %}This text becomes uppercase{% endfilter %}
