"""What guardhook knows of the cluster: the view, the LWS group model, selectors, records."""
