"""Sending one case's streams from many processes and hosts (execnet), every stamp on the controller's clock."""
