{% extends "./inheritance/base.tpl" %}

{% block content %}Extends' content{% endblock content %}
