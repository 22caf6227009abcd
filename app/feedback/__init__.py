"""Feedback is data: thumbs up or down, with an optional comment, on one's own turns
(issue 28, item 3); read back by the admin audit and the privacy export."""
